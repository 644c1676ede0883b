module example.com/legacy

go 1.26.0

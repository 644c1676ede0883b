module example.com/fixable

go 1.26.0

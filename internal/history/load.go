package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Load reads the events of every *.jsonl file in dir, file by file in name
// order. A last line without its newline that does not parse was cut short by
// a kill and is ignored; any other line that does not parse is an error
// naming its file and line.
func Load(dir string) ([]Event, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	var events []Event
	for _, de := range entries {
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".jsonl") {
			continue
		}
		if events, err = loadFile(filepath.Join(dir, de.Name()), events); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// loadFile appends the events of one file to events.
func loadFile(path string, events []Event) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		var e Event
		switch {
		case errors.Is(err, io.EOF):
			if len(line) > 0 && json.Unmarshal(line, &e) == nil {
				events = append(events, e)
			}
			return events, nil
		case err != nil:
			return nil, fmt.Errorf("load history %s: %w", path, err)
		}
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("load history %s line %d: %w", path, n, err)
		}
		events = append(events, e)
	}
}

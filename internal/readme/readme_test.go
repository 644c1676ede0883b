package readme

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// snippet is one ```go block of a Markdown file.
type snippet struct {
	line int // the line of its first line of code
	code string
}

// goSnippets returns the ```go blocks of the Markdown file at path.
func goSnippets(t *testing.T, path string) []snippet {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out  []snippet
		cur  *snippet
		b    strings.Builder
		line int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line++
		text := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(text) == "```go":
			cur = &snippet{line: line + 1}
			b.Reset()
		case cur != nil && strings.TrimSpace(text) == "```":
			cur.code = b.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			b.WriteString(text + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: a ```go block is never closed", path, cur.line-1)
	}
	return out
}

// position matches a position the compiler or vet reports in a snippet's
// file, snippet_<line>.go:<line>:<column>.
var position = regexp.MustCompile(`\S*snippet_(\d+)\.go:(\d+)(:\d+)?`)

// README.md's Go snippets compile and pass go vet as shown: each is a
// complete file (its package clause and imports included), written into a
// package of this module and vetted there, so that a snippet that drifts
// from the API fails here with its README line.
func TestREADMESnippetsCompile(t *testing.T) {
	const readme = "../../README.md"
	snippets := goSnippets(t, readme)
	if len(snippets) == 0 {
		t.Fatalf("%s has no ```go block: is this the README?", readme)
	}
	// testdata is ignored by ./... patterns: other builds never see the
	// package, and it is removed when the test ends.
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("testdata", "snippets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pkg := ""
	for _, s := range snippets {
		clause := regexp.MustCompile(`(?m)^package (\w+)$`).FindStringSubmatch(s.code)
		if clause == nil {
			t.Errorf("README.md:%d: the snippet is not a complete Go file: start it with its package clause and imports, so that it compiles as shown", s.line)
			continue
		}
		if pkg == "" {
			pkg = clause[1]
		}
		if clause[1] != pkg {
			t.Errorf("README.md:%d: package %s, while the first snippet is package %s: they are compiled together", s.line, clause[1], pkg)
			continue
		}
		name := filepath.Join(dir, fmt.Sprintf("snippet_%d.go", s.line))
		if err := os.WriteFile(name, []byte(s.code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if t.Failed() {
		return
	}
	cmd := exec.Command("go", "vet", "./"+filepath.ToSlash(dir))
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	// Report each problem at its README line.
	report := position.ReplaceAllStringFunc(string(out), func(p string) string {
		m := position.FindStringSubmatch(p)
		start, _ := strconv.Atoi(m[1])
		at, _ := strconv.Atoi(m[2])
		return fmt.Sprintf("README.md:%d%s", start+at-1, m[3])
	})
	t.Errorf("README.md's Go snippets do not compile or vet (%v):\n%s", err, report)
}

package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
)

// series is one line of the plot: jobs/s at each worker count.
type series struct {
	Name  string
	Color color.RGBA
	X, Y  []float64
}

// writePlot draws jobs/s against worker count (log scale) for each series
// as a PNG: the standard library and a 5×7 pixel font, nothing else.
func writePlot(path, title string, ss []series) error {
	const w, h = 900, 540
	const left, right, top, bottom = 90, 30, 84, 70
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(img, img.Bounds(), color.RGBA{255, 255, 255, 255})

	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range ss {
		for i := range s.X {
			xmin, xmax, ymax = math.Min(xmin, s.X[i]), math.Max(xmax, s.X[i]), math.Max(ymax, s.Y[i])
		}
	}
	if xmin >= xmax {
		xmin, xmax = xmin/2, xmax*2
	}
	lx0, lx1 := math.Log10(xmin)-0.1, math.Log10(xmax)+0.1
	step := niceStep(ymax / 5)
	ytop := math.Ceil(ymax*1.05/step) * step
	px := func(x float64) int { return left + int((math.Log10(x)-lx0)/(lx1-lx0)*float64(w-left-right)) }
	py := func(y float64) int { return h - bottom - int(y/ytop*float64(h-top-bottom)) }

	grid, axis, ink := color.RGBA{225, 225, 225, 255}, color.RGBA{60, 60, 60, 255}, color.RGBA{30, 30, 30, 255}
	for y := 0.0; y <= ytop+step/2; y += step {
		line(img, left, py(y), w-right, py(y), grid, 1)
		label := fmt.Sprintf("%.0f", y)
		text(img, left-8-textWidth(label, 2), py(y)-7, label, ink, 2)
	}
	for _, x := range xTicks(ss) {
		line(img, px(x), top, px(x), h-bottom, grid, 1)
		label := fmt.Sprintf("%.0f", x)
		text(img, px(x)-textWidth(label, 2)/2, h-bottom+10, label, ink, 2)
	}
	line(img, left, h-bottom, w-right, h-bottom, axis, 2)
	line(img, left, top, left, h-bottom, axis, 2)
	text(img, (w-textWidth("WORKERS (LOG SCALE)", 2))/2, h-bottom+38, "WORKERS (LOG SCALE)", ink, 2)
	text(img, 10, top-24, "JOBS/S", ink, 2)
	text(img, (w-textWidth(title, 2))/2, 14, title, ink, 2)

	for si, s := range ss {
		for i := range s.X {
			if i > 0 {
				line(img, px(s.X[i-1]), py(s.Y[i-1]), px(s.X[i]), py(s.Y[i]), s.Color, 3)
			}
			fill(img, image.Rect(px(s.X[i])-5, py(s.Y[i])-5, px(s.X[i])+6, py(s.Y[i])+6), s.Color)
		}
		lx, ly := left+si*360, 44
		fill(img, image.Rect(lx, ly, lx+30, ly+14), s.Color)
		text(img, lx+40, ly, strings.ToUpper(s.Name), ink, 2)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func xTicks(ss []series) []float64 {
	seen := map[float64]bool{}
	var xs []float64
	for _, s := range ss {
		for _, x := range s.X {
			if !seen[x] {
				seen[x] = true
				xs = append(xs, x)
			}
		}
	}
	return xs
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// line draws a segment of the given thickness.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, thick int) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		x := x0 + (x1-x0)*i/n
		y := y0 + (y1-y0)*i/n
		fill(img, image.Rect(x-thick/2, y-thick/2, x-thick/2+thick, y-thick/2+thick), c)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func textWidth(s string, scale int) int { return len(s) * 6 * scale }

// text draws s in the 5×7 font, scaled; lower case is drawn as upper case.
func text(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	for _, r := range strings.ToUpper(s) {
		g, ok := glyphs[r]
		if !ok {
			g = glyphs['?']
		}
		for row, bits := range g {
			for col, b := range bits {
				if b == '#' {
					fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
				}
			}
		}
		x += 6 * scale
	}
}

var glyphs = map[rune][7]string{
	' ': {".....", ".....", ".....", ".....", ".....", ".....", "....."},
	'0': {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."},
	'1': {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'2': {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"},
	'3': {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."},
	'4': {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."},
	'5': {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."},
	'6': {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."},
	'7': {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."},
	'8': {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."},
	'9': {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."},
	'A': {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'B': {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."},
	'C': {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."},
	'D': {"###..", "#..#.", "#...#", "#...#", "#...#", "#..#.", "###.."},
	'E': {"#####", "#....", "#....", "####.", "#....", "#....", "#####"},
	'F': {"#####", "#....", "#....", "####.", "#....", "#....", "#...."},
	'G': {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"},
	'H': {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'I': {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'J': {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."},
	'K': {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"},
	'L': {"#....", "#....", "#....", "#....", "#....", "#....", "#####"},
	'M': {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"},
	'N': {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"},
	'O': {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."},
	'P': {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."},
	'Q': {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"},
	'R': {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"},
	'S': {".####", "#....", "#....", ".###.", "....#", "....#", "####."},
	'T': {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."},
	'U': {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."},
	'V': {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."},
	'W': {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."},
	'X': {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"},
	'Y': {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."},
	'Z': {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"},
	'.': {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."},
	',': {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."},
	':': {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."},
	'/': {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."},
	'-': {".....", ".....", ".....", "#####", ".....", ".....", "....."},
	'(': {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."},
	')': {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."},
	'=': {".....", ".....", "#####", ".....", "#####", ".....", "....."},
	'%': {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"},
	'+': {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."},
	'?': {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."},
	'×': {".....", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "....."},
}

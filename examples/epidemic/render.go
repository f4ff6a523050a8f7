package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// runState is a run as a snapshot holds it: the grid, and the regions in
// the order of their index (none if the grid had not spawned them).
type runState struct {
	ID      snapshot.SnapshotID
	Grid    *grid
	Regions []*region
}

// decodeRun decodes the grid's and the regions' states in g.
func decodeRun(g *snapshot.Global) (*runState, error) {
	gr, err := actors.DecodeState[*grid](g, gridName)
	if err != nil {
		return nil, fmt.Errorf("snapshot %d: not an epidemic: %w", g.ID, err)
	}
	s := &runState{ID: g.ID, Grid: gr}
	for _, p := range g.Participants {
		if p.Kind != regionKind {
			continue
		}
		r, err := actors.DecodeState[*region](g, p.ID)
		if err != nil {
			return nil, err
		}
		if r.Side > 0 { // set up
			s.Regions = append(s.Regions, r)
		}
	}
	slices.SortFunc(s.Regions, func(a, b *region) int { return a.Index - b.Index })
	return s, nil
}

// ticks returns the lowest and the highest tick of the regions.
func (s *runState) ticks() (lo, hi int) {
	for i, r := range s.Regions {
		if i == 0 || r.Tick < lo {
			lo = r.Tick
		}
		hi = max(hi, r.Tick)
	}
	return lo, hi
}

// totals returns the counts of the whole grid at each tick every region
// has reached.
func (s *runState) totals() []Counts {
	if len(s.Regions) < s.Grid.Side*s.Grid.Side {
		return nil
	}
	lo, _ := s.ticks()
	cs := make([]Counts, lo+1)
	for _, r := range s.Regions {
		for t := range cs {
			c := r.History.At(t)
			cs[t].S += c.S
			cs[t].I += c.I
			cs[t].R += c.R
		}
	}
	return cs
}

// forkTick returns the first tick a region ran with changed parameters,
// or -1.
func (s *runState) forkTick() int {
	tick := -1
	for _, r := range s.Regions {
		if len(r.Forks) > 0 && (tick < 0 || r.Forks[0].Tick < tick) {
			tick = r.Forks[0].Tick
		}
	}
	return tick
}

// render is the render command: pictures of a stored run.
func render(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	store := fs.String("store", "", "the store to read: a directory or a store URL")
	id := fs.String("id", "latest", "the snapshot to draw: an id, or latest")
	gridPNG := fs.String("grid", "", "write a heat map of the infected share of each region here (PNG)")
	curvesPNG := fs.String("curves", "", "write the S, I and R curves of the run so far here (PNG)")
	compare := fs.String("compare", "", "with --curves: another store (a fork, say) whose latest snapshot's curves are drawn dashed beside")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *store == "":
		return errors.New("--store: which store to draw")
	case *gridPNG == "" && *curvesPNG == "":
		return errors.New("nothing to draw: give --grid or --curves, or both")
	case *compare != "" && *curvesPNG == "":
		return errors.New("--compare draws curves: give --curves")
	}
	a, err := loadRun(ctx, *store, *id)
	if err != nil {
		return err
	}
	if *gridPNG != "" {
		if err := drawGrid(a, *gridPNG); err != nil {
			return err
		}
		lo, hi := a.ticks()
		fmt.Fprintf(w, "%s: snapshot %d of %s, regions at ticks %d..%d\n", *gridPNG, a.ID, *store, lo, hi)
	}
	if *curvesPNG != "" {
		runs := []named{{filepath.Base(*store), a}}
		if *compare != "" {
			b, err := loadRun(ctx, *compare, "latest")
			if err != nil {
				return err
			}
			runs = append(runs, named{filepath.Base(*compare), b})
		}
		if err := drawCurves(runs, *curvesPNG); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: snapshot %d of %s", *curvesPNG, a.ID, *store)
		if len(runs) > 1 {
			fmt.Fprintf(w, " and snapshot %d of %s", runs[1].run.ID, *compare)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// loadRun decodes the snapshot id ("latest" or a number) of the store at
// url, which it does not change.
func loadRun(ctx context.Context, url, id string) (*runState, error) {
	var n uint64
	if id != "latest" {
		var err error
		if n, err = strconv.ParseUint(id, 10, 64); err != nil || n == 0 {
			return nil, fmt.Errorf("--id %q: want a snapshot id or latest", id)
		}
	}
	store, err := persistence.OpenURL(ctx, url, persistence.MustExist())
	if err != nil {
		return nil, err
	}
	defer closeStore(store)
	g, err := load(ctx, store, snapshot.SnapshotID(n))
	if err != nil {
		return nil, err
	}
	s, err := decodeRun(g)
	if err != nil {
		return nil, err
	}
	if len(s.Regions) < s.Grid.Side*s.Grid.Side {
		return nil, fmt.Errorf("snapshot %d of %s: taken before the regions were set up", g.ID, url)
	}
	return s, nil
}

// shares is the infected share of each region at one tick, as a grid for
// a heat map: column x, row 0 at the bottom, so that region 0 (the
// north-west corner) is drawn top left.
type shares struct {
	side int
	z    []float64 // by region index
}

func (s shares) Dims() (c, r int)   { return s.side, s.side }
func (s shares) Z(c, r int) float64 { return s.z[(s.side-1-r)*s.side+c] }
func (s shares) X(c int) float64    { return float64(c) }
func (s shares) Y(r int) float64    { return float64(r) }

// drawGrid writes a heat map of each region's infected share at the
// lowest tick every region has reached.
func drawGrid(s *runState, path string) error {
	tick, _ := s.ticks()
	side := s.Grid.Side
	z := shares{side: side, z: make([]float64, side*side)}
	for _, r := range s.Regions {
		if c := r.History.At(tick); c.S+c.I+c.R > 0 {
			z.z[r.Index] = float64(c.I) / float64(c.S+c.I+c.R)
		}
	}
	top := slices.Max(z.z)
	if top == 0 {
		top = 1 // nobody infected: any scale
	}
	colours := palette.Reverse(moreland.BlackBody())
	colours.SetMin(0)
	colours.SetMax(top)

	p := plot.New()
	p.Title.Text = fmt.Sprintf("infected share per region, tick %d (snapshot %d; grey: none)", tick, s.ID)
	h := plotter.NewHeatMap(z, colours.Palette(64))
	// A region without infected agents is grey, apart from the palette's
	// white of a few.
	h.Min, h.Max = math.SmallestNonzeroFloat64, top
	h.Underflow = color.Gray{Y: 0xdd}
	p.Add(h)
	p.X.Label.Text, p.Y.Label.Text = "x (region column)", "y (region row, from the top)"
	p.X.Padding, p.Y.Padding = 0, 0
	p.Y.Tick.Marker = flipped{side}

	bar := plot.New()
	bar.Title.Text = "share"
	cb := &plotter.ColorBar{ColorMap: colours, Vertical: true}
	bar.Add(cb)
	bar.HideX()
	bar.Y.Padding = 0

	const width, height, barWidth = 6 * vg.Inch, 5 * vg.Inch, 0.9 * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -barWidth, 0, 0))
	bar.Draw(draw.Crop(dc, width-barWidth, 0, 0, -p.Title.TextStyle.FontExtents().Height))
	return writePNG(img, path)
}

// flipped labels the rows of a heat map drawn with row 0 at the top.
type flipped struct{ side int }

func (f flipped) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for r := 0; r < f.side; r++ {
		if f.side <= 16 || r%(f.side/8) == 0 {
			ts = append(ts, plot.Tick{Value: float64(f.side - 1 - r), Label: strconv.Itoa(r)})
		}
	}
	return ts
}

// named is a run and what its curves are labelled with.
type named struct {
	name string
	run  *runState
}

// drawCurves writes the curves of the runs, as shares of their agents:
// S and R above, I below on a scale of its own; the first run solid, the
// others dashed, with a line where each forks.
func drawCurves(runs []named, path string) error {
	colours := map[string]color.Color{
		"S": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		"I": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		"R": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	}
	panels := []*plot.Plot{plot.New(), plot.New()}
	panels[0].Title.Text = "agents by health"
	panels[0].Y.Label.Text, panels[1].Y.Label.Text = "share susceptible, recovered", "share infected"
	panels[1].X.Label.Text = "tick"
	for _, p := range panels {
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, false
		p.Y.Min = 0
	}
	panels[0].Y.Max = 1
	// Left, below the susceptible curves' start at 1: the space there is
	// empty in every SIR run.
	panels[0].Legend.Left, panels[0].Legend.YOffs = true, -vg.Points(24)
	panels[0].Legend.XOffs = vg.Points(8)
	for k, nr := range runs {
		totals := nr.run.totals()
		for _, name := range []string{"S", "R", "I"} {
			xys := make(plotter.XYs, len(totals))
			for t, c := range totals {
				n := map[string]int{"S": c.S, "I": c.I, "R": c.R}[name]
				xys[t] = plotter.XY{X: float64(t), Y: float64(n) / float64(max(c.S+c.I+c.R, 1))}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			l.Color, l.Width = colours[name], vg.Points(1.5)
			if k > 0 {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p := panels[0]
			if name == "I" {
				p = panels[1]
			}
			p.Add(l)
			label := name
			if len(runs) > 1 {
				label += " " + nr.name
			}
			p.Legend.Add(label, l)
		}
	}
	for _, nr := range runs {
		t := nr.run.forkTick()
		if t < 0 {
			continue
		}
		for i, p := range panels {
			l, err := plotter.NewLine(plotter.XYs{{X: float64(t), Y: 0}, {X: float64(t), Y: p.Y.Max}})
			if err != nil {
				return err
			}
			l.Color, l.Dashes = color.Gray{Y: 0x60}, []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(l)
			if i == 1 {
				p.Legend.Add(fmt.Sprintf("%s forks (tick %d)", nr.name, t), l)
			}
		}
	}
	const width, height = 7 * vg.Inch, 6 * vg.Inch
	img := vgimg.New(width, height)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{panels[0]}, {panels[1]}}, tiles, draw.New(img))
	panels[0].Draw(canvases[0][0])
	panels[1].Draw(canvases[1][0])
	return writePNG(img, path)
}

// writePNG writes img to path as a PNG.
func writePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

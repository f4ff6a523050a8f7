package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/decoded"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/snapshot"
)

// dotGraph is a graph as parseDOT reads it: each node's attributes,
// merged over its statements as Graphviz merges them, and each edge's.
type dotGraph struct {
	name  string
	nodes map[string]map[string]string
	edges []dotEdge
}

type dotEdge struct {
	from, to string
	attrs    map[string]string
}

// edge returns the attributes of the first edge from -> to whose
// attribute key is value, or nil.
func (g *dotGraph) edge(from, to, key, value string) map[string]string {
	for _, e := range g.edges {
		if e.from == from && e.to == to && e.attrs[key] == value {
			return e.attrs
		}
	}
	return nil
}

// parseDOT parses the part of the DOT language (graphviz.org/doc/info/lang.html)
// that writeDOT writes, and fails on anything else:
//
//	graph     : "digraph" [ID] "{" { stmt [";"] } "}"
//	stmt      : ID "=" ID | ("graph" | "node" | "edge") attr_list
//	          | ID [attr_list] | ID "->" ID { "->" ID } [attr_list]
//	attr_list : "[" [ ID "=" ID { ("," | ";") ID "=" ID } ] "]"
//
// An ID is a name of letters, digits, '_' and '.', or a double-quoted
// string, in which a backslash takes the next character with it (DOT's
// lexer reads \" and \\ so; the other sequences stay as written).
func parseDOT(src string) (*dotGraph, error) {
	toks, err := dotTokens(src)
	if err != nil {
		return nil, err
	}
	p := &dotParser{toks: toks}
	return p.graph()
}

type dotToken struct {
	kind byte // 'i' for an ID, 'q' for a quoted one; else the punctuation: { } [ ] = ; , and '>' for ->
	text string
}

func dotTokens(src string) ([]dotToken, error) {
	var toks []dotToken
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.IndexByte("{}[]=;,", c) >= 0:
			toks = append(toks, dotToken{kind: c})
			i++
		case c == '-' && i+1 < len(src) && src[i+1] == '>':
			toks = append(toks, dotToken{kind: '>'})
			i += 2
		case c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\\' && j+1 < len(src) {
					if src[j+1] == '"' {
						b.WriteByte('"')
					} else {
						b.WriteString(src[j : j+2])
					}
					j++
					continue
				}
				b.WriteByte(src[j])
			}
			if j == len(src) {
				return nil, fmt.Errorf("offset %d: string not closed", i)
			}
			toks = append(toks, dotToken{kind: 'q', text: b.String()})
			i = j + 1
		case c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] == '.' || src[j] >= '0' && src[j] <= '9' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z') {
				j++
			}
			toks = append(toks, dotToken{kind: 'i', text: src[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("offset %d: unexpected %q", i, c)
		}
	}
	return toks, nil
}

type dotParser struct {
	toks []dotToken
	at   int
}

func (p *dotParser) peek() dotToken {
	if p.at < len(p.toks) {
		return p.toks[p.at]
	}
	return dotToken{kind: 0}
}

func (p *dotParser) next() dotToken { t := p.peek(); p.at++; return t }

func (p *dotParser) expect(kind byte) error {
	if t := p.next(); t.kind != kind {
		return fmt.Errorf("token %d: want %q, got %q %q", p.at-1, kind, t.kind, t.text)
	}
	return nil
}

func (p *dotParser) id() (string, error) {
	t := p.next()
	if t.kind != 'i' && t.kind != 'q' {
		return "", fmt.Errorf("token %d: want an ID, got %q", p.at-1, t.kind)
	}
	return t.text, nil
}

func (p *dotParser) graph() (*dotGraph, error) {
	g := &dotGraph{nodes: map[string]map[string]string{}}
	if t := p.next(); t.kind != 'i' || t.text != "digraph" {
		return nil, fmt.Errorf("want digraph, got %q", t.text)
	}
	if t := p.peek(); t.kind == 'i' || t.kind == 'q' {
		g.name = p.next().text
	}
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	for p.peek().kind != '}' {
		if err := p.stmt(g); err != nil {
			return nil, err
		}
		if p.peek().kind == ';' {
			p.next()
		}
	}
	p.next()
	if p.at != len(p.toks) {
		return nil, fmt.Errorf("token %d: text after the graph", p.at)
	}
	return g, nil
}

func (p *dotParser) stmt(g *dotGraph) error {
	t := p.peek()
	if t.kind == 'i' && (t.text == "graph" || t.text == "node" || t.text == "edge") {
		p.next()
		_, err := p.attrs()
		return err
	}
	first, err := p.id()
	if err != nil {
		return err
	}
	switch p.peek().kind {
	case '=':
		p.next()
		_, err := p.id()
		return err
	case '>':
		ids := []string{first}
		for p.peek().kind == '>' {
			p.next()
			id, err := p.id()
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		attrs, err := p.attrs()
		if err != nil {
			return err
		}
		for i := 1; i < len(ids); i++ {
			g.node(ids[i-1], nil)
			g.node(ids[i], nil)
			g.edges = append(g.edges, dotEdge{from: ids[i-1], to: ids[i], attrs: attrs})
		}
		return nil
	}
	attrs, err := p.attrs()
	if err != nil {
		return err
	}
	g.node(first, attrs)
	return nil
}

// attrs reads an optional attribute list.
func (p *dotParser) attrs() (map[string]string, error) {
	out := map[string]string{}
	if p.peek().kind != '[' {
		return out, nil
	}
	p.next()
	for p.peek().kind != ']' {
		k, err := p.id()
		if err != nil {
			return nil, err
		}
		if err := p.expect('='); err != nil {
			return nil, err
		}
		v, err := p.id()
		if err != nil {
			return nil, err
		}
		out[k] = v
		if t := p.peek().kind; t == ',' || t == ';' {
			p.next()
		}
	}
	p.next()
	return out, nil
}

func (g *dotGraph) node(id string, attrs map[string]string) {
	n := g.nodes[id]
	if n == nil {
		n = map[string]string{}
		g.nodes[id] = n
	}
	for k, v := range attrs {
		n[k] = v
	}
}

// The parser refuses what is not DOT, so that the tests below show
// something when it accepts.
func TestParseDOTRefuses(t *testing.T) {
	for _, src := range []string{
		``,
		`graph g {}`,
		`digraph g {`,
		`digraph g { "a }`,
		`digraph g { a -> }`,
		`digraph g { a [label] }`,
		`digraph g { a [label=x }`,
		`digraph g { a -- b }`,
		`digraph g {} x`,
	} {
		_, err := parseDOT(src)
		assert.Error(t, err, src)
	}
	g, err := parseDOT(`digraph g { rankdir=LR; node [shape=box]; "a\"b" [label="x\ny"]; a -> "b" -> c [color=red, style=dashed]; "a\"b" [color=blue] }`)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"label": `x\ny`, "color": "blue"}, g.nodes[`a"b`])
	require.Len(t, g.edges, 2)
	assert.Equal(t, dotEdge{from: "b", to: "c", attrs: map[string]string{"color": "red", "style": "dashed"}}, g.edges[1])
}

// dotGlobals are the snapshots the DOT tests draw: one with waits and a
// deadlock, one without, and one of names DOT must quote.
func dotGlobals() map[string]*snapshot.Global {
	odd := waitsGlobal()
	for i := range odd.Participants {
		odd.Participants[i].Kind = "k\"ind\\"
	}
	odd.Participants = append(odd.Participants, snapshot.Participant{ID: "z \"quoted\" \\ ->; [x] é\n", State: []byte{1}})
	odd.Participants[0].Waits.Edges = append(odd.Participants[0].Waits.Edges, snapshot.Wait{To: "z \"quoted\" \\ ->; [x] é\n", Type: "a \"fork\""})
	// A state whose summary DOT must escape.
	odd.Participants[0].State, _ = msgpack.Marshal(map[string]string{"Note": "say \"hi\" \\ ->; [x] é\n"})
	plain := waitsGlobal()
	for i := range plain.Participants {
		plain.Participants[i].Waits = nil
	}
	return map[string]*snapshot.Global{"waits": waitsGlobal(), "no waits": plain, "odd names": odd}
}

// The DOT graph parses; its deadlock is red, its other waits blue and
// dashed; and a snapshot without waits is drawn as before waits were.
func TestExportDOT(t *testing.T) {
	for name, g := range dotGlobals() {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			require.NoError(t, writeDOT(&b, g))
			dg, err := parseDOT(b.String())
			require.NoError(t, err, b.String())
			assert.Equal(t, "snapshot_7", dg.name)
			for _, p := range g.Participants {
				assert.Contains(t, dg.nodes, dotName(t, p.ID))
			}
			for _, c := range g.Channels {
				assert.NotNil(t, dg.edge(dotName(t, c.Channel.From), dotName(t, c.Channel.To), "label", fmt.Sprint(len(c.Messages))), "channel %s", c.Channel)
			}
			for _, p := range g.Participants {
				summary := "\n" + decoded.Format(decoded.State(p), dotStateWidth)
				if p.Departed {
					summary = ""
				}
				label := fmt.Sprintf("%s\n%s, %d B%s", p.ID, p.Kind, len(p.State), summary)
				assert.Equal(t, dotName(t, snapshot.ProcessID(label)), dg.nodes[dotName(t, p.ID)]["label"], "the node's kind, size and state")
			}
			if name == "odd names" {
				assert.Equal(t, `{Note: "say \"hi\" \\ ->; [x] é\n"}`, decoded.Format(decoded.State(g.Participants[0]), dotStateWidth), "the summary of a's state, whole")
				assert.Equal(t, "blue", dg.edge("a", dotName(t, "z \"quoted\" \\ ->; [x] é\n"), "label", `a "fork"`)["color"])
			}
			waits := 0
			for _, e := range dg.edges {
				if e.attrs["style"] == "dashed" {
					waits++
				}
			}
			switch name {
			case "no waits":
				assert.Zero(t, waits)
				assert.NotContains(t, b.String(), "color=")
			default:
				assert.Equal(t, "red", dg.nodes["a"]["color"])
				assert.Equal(t, "red", dg.nodes["b"]["color"])
				assert.Equal(t, "orange", dg.nodes["c"]["color"])
				assert.Empty(t, dg.nodes["d"]["color"])
				assert.Equal(t, "red", dg.edge("a", "b", "label", "request 7")["color"])
				assert.Equal(t, "red", dg.edge("b", "a", "label", "request 9")["color"])
				assert.Equal(t, "blue", dg.edge("c", "a", "label", "fork")["color"])
				assert.Equal(t, "blue", dg.edge("d", "b", "label", "request 2")["color"])
				assert.Equal(t, "blue", dg.edge("d", "e", "label", "spoon")["color"])
			}
		})
	}
}

// dotName returns the name of id's node as DOT reads it from the quoted
// string writeDOT writes: the escapes it does not know stay as written.
func dotName(t *testing.T, id snapshot.ProcessID) string {
	t.Helper()
	toks, err := dotTokens(strconv.Quote(string(id)))
	require.NoError(t, err)
	require.Len(t, toks, 1)
	return toks[0].text
}

// With Graphviz installed, dot itself reads the graphs, warning of
// nothing.
func TestExportDOTGraphviz(t *testing.T) {
	testenv.Graphviz(t) // TestExportDOT parses the graphs without it
	for name, g := range dotGlobals() {
		var b strings.Builder
		require.NoError(t, writeDOT(&b, g))
		graphvizReads(t, name, b.String())
	}
}

// graphvizReads has Graphviz's dot lay src out, when dot is installed,
// and fails if it refuses src or warns.
func graphvizReads(t *testing.T, name, src string) {
	t.Helper()
	dot, err := exec.LookPath("dot")
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dot, "-Tsvg", "-o", os.DevNull)
	cmd.Stdin = strings.NewReader(src)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s\n%s", name, out, src)
	assert.Empty(t, string(out), "%s: dot warned", name)
}

package lossless

import (
	"encoding"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// method is one of the interfaces msgpack hands a whole value to.
type method struct {
	iface reflect.Type
	name  string // the interface, as an Error names it
	fn    string // its method
}

// encoders and decoders are the interfaces msgpack honours, in the order
// it looks for them (encode_value.go, decode_value.go): the first one the
// type implements wins, then the first one a pointer to it implements.
// The same index in both is a matching pair.
var (
	encoders = [...]method{
		{reflect.TypeFor[msgpack.CustomEncoder](), "msgpack.CustomEncoder", "EncodeMsgpack"},
		{reflect.TypeFor[msgpack.Marshaler](), "msgpack.Marshaler", "MarshalMsgpack"},
		{reflect.TypeFor[encoding.BinaryMarshaler](), "encoding.BinaryMarshaler", "MarshalBinary"},
		{reflect.TypeFor[encoding.TextMarshaler](), "encoding.TextMarshaler", "MarshalText"},
	}
	decoders = [...]method{
		{reflect.TypeFor[msgpack.CustomDecoder](), "msgpack.CustomDecoder", "DecodeMsgpack"},
		{reflect.TypeFor[msgpack.Unmarshaler](), "msgpack.Unmarshaler", "UnmarshalMsgpack"},
		{reflect.TypeFor[encoding.BinaryUnmarshaler](), "encoding.BinaryUnmarshaler", "UnmarshalBinary"},
		{reflect.TypeFor[encoding.TextUnmarshaler](), "encoding.TextUnmarshaler", "UnmarshalText"},
	}
)

// timeType is the one type msgpack registers an extension for itself
// (time.go), ahead of the interfaces time.Time implements.
var timeType = reflect.TypeFor[time.Time]()

// codec is the interface msgpack uses for a type.
type codec struct {
	i    int  // index in encoders or decoders plus one; 0 when none
	addr bool // only a pointer to the type implements it
}

// choose returns the first of ms that t implements, as msgpack picks it.
func choose(t reflect.Type, ms *[4]method) codec {
	for i, m := range ms {
		if t.Implements(m.iface) {
			return codec{i: i + 1}
		}
	}
	if t.Kind() != reflect.Pointer {
		pt := reflect.PointerTo(t)
		for i, m := range ms {
			if pt.Implements(m.iface) {
				return codec{i: i + 1, addr: true}
			}
		}
	}
	return codec{}
}

// problem is what Check turns into an Error.
type problem struct {
	path   string // from the root, without its name: ".Entries[].note"
	typ    reflect.Type
	reason Reason
	detail string
	fixes  []string
}

// walker goes through a type depth first, in field order, as msgpack
// encodes it.
type walker struct {
	cfg config
	// seen maps a type walked, or being walked, to whether msgpack could
	// take the address of its value there. Without an address is the
	// stricter walk (msgpack calls pointer methods only with one), so a
	// type seen without one is not walked again.
	seen map[reflect.Type]bool
	// building holds the structs whose msgpack field list is being built,
	// to see where msgpack would recurse without end.
	building map[reflect.Type]bool
}

// walk returns the first problem in t, reached at path; addr tells
// whether msgpack can take the address of a value of t there. A type seen
// before is not walked again, which ends recursive types.
var errorType = reflect.TypeFor[error]()

func (w *walker) walk(t reflect.Type, path string, addr bool) *problem {
	if had, ok := w.seen[t]; ok && (!had || addr) {
		return nil
	}
	w.seen[t] = addr
	if t == timeType || w.trusted(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		// Only the value inside is encoded, and it is known at run time.
		// msgpack decodes into any and error, and panics decoding into
		// any other interface a value that is not nil.
		if t.NumMethod() == 0 || t == errorType || path == "" {
			return nil
		}
		return &problem{path: path, typ: t, reason: Unsupported,
			detail: "msgpack cannot decode into a non-empty interface: a restore panics", fixes: []string{"use a concrete type or any"}}
	case reflect.Pointer:
		// msgpack uses the pointer's methods, or encodes what it points
		// to, which is addressable; walking the target covers both.
		return w.walk(t.Elem(), path, true)
	}
	enc, dec := choose(t, &encoders), choose(t, &decoders)
	if enc.i != 0 || dec.i != 0 {
		return w.marshaler(t, path, addr, enc, dec)
	}
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return &problem{path: path, typ: t, reason: Unsupported,
			detail: fmt.Sprintf("msgpack cannot encode a %s", t.Kind())}
	case reflect.Uintptr:
		// msgpack has no encoder or decoder for the kind and calls a nil
		// function.
		return &problem{path: path, typ: t, reason: Unsupported,
			detail: "msgpack panics on a uintptr", fixes: []string{"use a uint64"}}
	case reflect.Array:
		return w.walk(t.Elem(), path+"[]", addr)
	case reflect.Slice:
		return w.walk(t.Elem(), path+"[]", true)
	case reflect.Map:
		// msgpack encodes keys and values as copies, not addressable.
		if p := w.walk(t.Key(), path+"[key]", false); p != nil {
			return p
		}
		return w.walk(t.Elem(), path+"[]", false)
	case reflect.Struct:
		return w.walkStruct(t, path, addr)
	}
	return nil
}

// trusted reports whether the caller trusts t through Trust.
func (w *walker) trusted(t reflect.Type) bool {
	for _, tt := range w.cfg.trusted {
		if tt.Kind() != reflect.Interface {
			if t == tt {
				return true
			}
			continue
		}
		if t.Implements(tt) || t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(tt) {
			return true
		}
	}
	return false
}

// trustedConcrete reports whether the caller trusts exactly t, which
// Trust documents as a type registered with msgpack.
func (w *walker) trustedConcrete(t reflect.Type) bool {
	for _, tt := range w.cfg.trusted {
		if tt == t && tt.Kind() != reflect.Interface {
			return true
		}
	}
	return false
}

// marshaler checks a type msgpack hands to one of its methods: the
// decoder must match the encoder, a struct must declare the method itself
// rather than get it from an embedded field, and a pointer method needs
// an address.
func (w *walker) marshaler(t reflect.Type, path string, addr bool, enc, dec codec) *problem {
	if enc.i != dec.i {
		var fix string
		if enc.i != 0 {
			fix = fmt.Sprintf("implement %s on %s", decoders[enc.i-1].name, t)
		} else {
			fix = fmt.Sprintf("implement %s on %s", encoders[dec.i-1].name, t)
		}
		return &problem{path: path, typ: t, reason: HalfMarshaler,
			detail: fmt.Sprintf("msgpack encodes it %s and decodes it %s", how(t, enc, &encoders), how(t, dec, &decoders)),
			fixes:  []string{fix}}
	}
	if t.Kind() == reflect.Struct {
		if p := promoted(t, path, enc); p != nil {
			return p
		}
	}
	if enc.addr && !addr {
		m := encoders[enc.i-1].fn
		fixes := []string{fmt.Sprintf("give %s a value receiver", m)}
		if path == "" {
			fixes = append(fixes, fmt.Sprintf("encode a *%s", t))
		} else {
			fixes = append(fixes, fmt.Sprintf("hold a *%s there", t))
		}
		return &problem{path: path, typ: t, reason: Unaddressable,
			detail: fmt.Sprintf("msgpack calls (*%s).%s on a value it cannot take the address of", t, m),
			fixes:  fixes}
	}
	return nil
}

// how says in words how msgpack encodes or decodes t.
func how(t reflect.Type, c codec, ms *[4]method) string {
	switch {
	case c.i != 0:
		return "with " + ms[c.i-1].name
	case t.Kind() == reflect.Struct:
		return "field by field"
	default:
		return "as a plain " + t.Kind().String()
	}
}

// promoted returns the first field that msgpack drops because struct t
// gets the method msgpack encodes it with from an embedded field. A
// promoted method is a wrapper the compiler generates; a method t
// declares has a source position.
func promoted(t reflect.Type, path string, enc codec) *problem {
	name := encoders[enc.i-1].fn
	rt := t
	if enc.addr {
		rt = reflect.PointerTo(t)
	}
	m, ok := rt.MethodByName(name)
	if !ok {
		return nil
	}
	fn := runtime.FuncForPC(m.Func.Pointer())
	if fn == nil {
		return nil
	}
	if file, _ := fn.FileLine(fn.Entry()); file != "<autogenerated>" {
		return nil
	}
	from := -1
	for i := range t.NumField() {
		if f := t.Field(i); f.Anonymous && hasMethod(f.Type, name) {
			from = i
			break
		}
	}
	if from < 0 {
		return nil
	}
	emb := t.Field(from).Name
	for i := range t.NumField() {
		f := t.Field(i)
		if i == from || f.Name == "_" || f.Name == "_msgpack" || parseTag(f.Tag.Get("msgpack")).name == "-" {
			continue
		}
		return &problem{path: path + "." + f.Name, typ: f.Type, reason: PromotedMarshaler,
			detail: fmt.Sprintf("%s gets %s from its embedded field %s, so msgpack encodes that field alone", t, name, emb),
			fixes:  []string{fmt.Sprintf("make %s a named field", emb)}}
	}
	return nil
}

// hasMethod reports whether t or a pointer to it has the named method.
func hasMethod(t reflect.Type, name string) bool {
	if _, ok := t.MethodByName(name); ok {
		return true
	}
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
		return false
	}
	_, ok := reflect.PointerTo(t).MethodByName(name)
	return ok
}

// plain reports whether msgpack encodes and decodes struct t field by
// field, which is when it inlines t embedded in another struct.
func (w *walker) plain(t reflect.Type) bool {
	return t != timeType && !w.trustedConcrete(t) &&
		choose(t, &encoders).i == 0 && choose(t, &decoders).i == 0
}

// walkStruct checks the fields of struct t as msgpack lays them out.
func (w *walker) walkStruct(t reflect.Type, path string, addr bool) *problem {
	l := w.layout(t)
	kept, unexported := 0, false
	for _, e := range l.entries {
		if e.listed && e.reason == 0 {
			kept++
		}
		if e.reason == Unexported {
			unexported = true
		}
	}
	if kept == 0 && unexported {
		return &problem{path: path, typ: t, reason: NoExportedFields,
			detail: fmt.Sprintf("%s has no exported fields, so msgpack encodes it as an empty map", t),
			fixes:  []string{"export its fields"}}
	}
	for _, e := range l.entries {
		p := path + "." + e.goPath
		if e.reason != 0 {
			return &problem{path: p, typ: e.typ, reason: e.reason, detail: e.detail, fixes: e.fixes}
		}
		if q := w.walk(e.typ, p, addr || e.viaPtr); q != nil {
			return q
		}
	}
	return nil
}

// entry is a field of a struct as msgpack sees it: one it encodes, or one
// it drops or fails on (reason set).
type entry struct {
	goPath string       // Go selector from the struct: "inner.b"
	typ    reflect.Type // the field's type
	name   string       // its msgpack name
	viaPtr bool         // reached through an embedded pointer
	listed bool         // in msgpack's field list, so encoded
	reason Reason
	detail string
	fixes  []string
}

func (e *entry) fail(r Reason, detail string, fixes ...string) {
	e.reason, e.detail, e.fixes = r, detail, fixes
}

// under returns a copy of e as a field of an embedded field named emb.
func (e *entry) under(emb string, viaPtr bool) *entry {
	c := *e
	c.goPath = emb + "." + e.goPath
	c.viaPtr = e.viaPtr || viaPtr
	return &c
}

// layout is a struct's field list as msgpack builds it (getFields in
// msgpack's types.go), with the fields it drops where Go declares them.
type layout struct {
	entries []*entry
	// byName maps a msgpack name to the field msgpack decodes it into,
	// the last one to claim it; an inlined embedded field keeps its own
	// name for a nested map.
	byName map[string]*entry
}

func (l *layout) add(e *entry) {
	e.listed = true
	l.byName[e.name] = e
	l.entries = append(l.entries, e)
}

// layout builds the msgpack field list of struct t.
func (w *walker) layout(t reflect.Type) *layout {
	w.building[t] = true
	defer delete(w.building, t)
	l := &layout{byName: map[string]*entry{}}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := parseTag(f.Tag.Get("msgpack"))
		if tag.name == "-" {
			continue
		}
		if !f.IsExported() && !f.Anonymous {
			// msgpack skips it. _ holds nothing, and _msgpack holds
			// msgpack's options for the struct.
			if f.Name != "_" && f.Name != "_msgpack" {
				e := &entry{goPath: f.Name, typ: f.Type}
				e.fail(Unexported, "unexported", "export it")
				l.entries = append(l.entries, e)
			}
			continue
		}
		e := &entry{goPath: f.Name, typ: f.Type, name: tag.name}
		if e.name == "" {
			e.name = f.Name
		}
		if k := f.Type.Kind(); tag.has("intern") && k != reflect.String && k != reflect.Interface {
			e.fail(Panics, fmt.Sprintf("msgpack panics on the intern option of a %s field", k), "remove the intern option")
			l.entries = append(l.entries, e)
			continue
		}
		if f.Anonymous && !tag.has("noinline") && w.inline(l, f, e, tag.has("inline")) {
			continue
		}
		if f.Anonymous && !f.IsExported() {
			switch {
			case f.Type.Kind() != reflect.Struct:
				e.fail(Panics, "msgpack cannot set an embedded field of an unexported type other than a struct, and panics decoding it",
					"export its type", "make it a named field")
				l.entries = append(l.entries, e)
				continue
			case !w.plain(f.Type):
				e.fail(Panics, "msgpack cannot call the methods of an embedded field of an unexported type, and panics",
					"export its type", "make it a named field")
				l.entries = append(l.entries, e)
				continue
			}
		}
		l.add(e)
		if alias, ok := tag.options["alias"]; ok {
			l.byName[alias] = e
		}
	}
	for _, e := range l.entries {
		if other := l.byName[e.name]; e.listed && e.reason == 0 && other != e {
			e.fail(Shadowed, fmt.Sprintf("msgpack decodes its name %q into %s", e.name, other.goPath),
				`give one of them another msgpack:"name"`)
		}
	}
	return l
}

// inline adds the fields of embedded field f (entry e) to l when msgpack
// inlines them: always with the inline tag option (msgpack's inlineFields,
// which drops the fields whose names are taken), otherwise when f is a
// struct, or pointer to one, that msgpack encodes field by field and none
// of its names is taken (shouldInline). It reports whether it took care
// of f.
func (w *walker) inline(l *layout, f reflect.StructField, e *entry, always bool) bool {
	if always {
		if f.Type.Kind() != reflect.Struct {
			e.fail(Panics, "msgpack panics on the inline option of an embedded field that is not a struct",
				"remove the inline option")
			l.entries = append(l.entries, e)
			return true
		}
		for _, ie := range w.layout(f.Type).entries {
			c := ie.under(f.Name, false)
			if !c.listed {
				l.entries = append(l.entries, c)
				continue
			}
			if other, ok := l.byName[c.name]; ok {
				c.listed = false
				c.fail(Shadowed, fmt.Sprintf("msgpack does not inline it, as %s has its name %q", other.goPath, c.name),
					`give one of them another msgpack:"name"`)
				l.entries = append(l.entries, c)
				continue
			}
			l.add(c)
		}
		l.byName[e.name] = e
		return true
	}
	base := deref(f.Type)
	ptr := base != f.Type
	if base.Kind() != reflect.Struct || !w.plain(base) {
		return false
	}
	if w.building[base] {
		e.fail(Panics, fmt.Sprintf("%s embeds itself through a pointer, and msgpack recurses without end building its fields", base),
			`add the msgpack:",noinline" tag option`)
		l.entries = append(l.entries, e)
		return true
	}
	inner := w.layout(base).entries
	listed := false
	for _, ie := range inner {
		if !ie.listed {
			continue
		}
		if _, ok := l.byName[ie.name]; ok {
			return false
		}
		listed = true
	}
	if ptr && !f.IsExported() && listed {
		e.fail(Panics, "msgpack inlines the fields of an embedded pointer to an unexported type, and panics decoding them, as it cannot allocate the pointer",
			"export its type", "embed the struct, not a pointer to it")
		l.entries = append(l.entries, e)
		return true
	}
	for _, ie := range inner {
		c := ie.under(f.Name, ptr)
		if c.listed {
			l.add(c)
		} else {
			l.entries = append(l.entries, c)
		}
	}
	l.byName[e.name] = e
	return true
}

// tag is a parsed msgpack struct tag: a name, then options, each a word or
// key:value, as github.com/vmihailenco/tagparser/v2 reads them (quoted
// values aside).
type tag struct {
	name    string
	options map[string]string
}

func (t tag) has(option string) bool {
	_, ok := t.options[option]
	return ok
}

func parseTag(s string) tag {
	var t tag
	if s == "" {
		return t
	}
	for i, part := range strings.Split(s, ",") {
		key, value, isKV := strings.Cut(part, ":")
		if !isKV {
			key, value = "", key
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if i == 0 && key == "" {
			t.name = value
			continue
		}
		if t.options == nil {
			t.options = map[string]string{}
		}
		if key == "" {
			t.options[value] = ""
		} else {
			t.options[key] = value
		}
	}
	return t
}

package lossless_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/internal/lossless"
)

// roundTrip encodes v with msgpack and decodes it into a fresh value of
// its type, turning a panic into an error.
func roundTrip(v any) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	data, err := msgpack.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	ptr := reflect.New(reflect.TypeOf(v))
	if err := msgpack.Unmarshal(data, ptr.Interface()); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return ptr.Elem().Interface(), nil
}

// TestRejectedRoundTripLoses shows that what Check rejects is really lost
// or fails: each sample comes back different, or msgpack returns an error
// or panics.
func TestRejectedRoundTripLoses(t *testing.T) {
	// msgpack logs the duplicate names it finds.
	log.SetOutput(io.Discard)
	t.Cleanup(func() { log.SetOutput(nil) })
	for _, c := range rejected {
		if c.sample == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			// A sample is a value of the type, or a pointer to one.
			v := reflect.ValueOf(c.sample)
			if v.Type() != c.t {
				v = v.Elem()
			}
			require.Equal(t, c.t, v.Type())
			want := v.Interface()
			out, err := roundTrip(want)
			if err != nil {
				t.Logf("fails: %v", err)
				return
			}
			require.NotEqual(t, want, out, "round trip kept the value")
		})
	}
}

// roundTripTypes are types Check accepts; TestAcceptedRoundTrip encodes
// random values of each and requires them back unchanged.
var roundTripTypes = []reflect.Type{
	typeOf[int](),
	typeOf[Scalars](),
	typeOf[*Scalars](),
	typeOf[Containers](),
	typeOf[Node](),
	typeOf[*Ping](),
	typeOf[Tagged](),
	typeOf[AsArray](),
	typeOf[Embedding](),
	typeOf[NotInlined](),
	typeOf[NoInlineSelf](),
	typeOf[Times](),
	typeOf[Loose](),
	typeOf[Empty](),
	typeOf[map[string]struct{}](),
	typeOf[*Ignored](),
	typeOf[*Marshalers](),
	typeOf[Point](),
	typeOf[*Counter](),
	typeOf[[]Counter](),
	typeOf[OwnMarshaler](),
	typeOf[JustTime](),
	typeOf[InlineNamed](),
}

// TestAcceptedRoundTrip is a property test: for types that Check accepts,
// random values survive msgpack unchanged.
func TestAcceptedRoundTrip(t *testing.T) {
	const runs = 300
	for _, typ := range roundTripTypes {
		t.Run(typ.String(), func(t *testing.T) {
			require.NoError(t, lossless.Check(typ))
			r := rand.New(rand.NewPCG(1, uint64(len(typ.String()))))
			for i := range runs {
				v := reflect.New(typ).Elem()
				fill(v, r, 0)
				in := v.Interface()
				out, err := roundTrip(in)
				require.NoError(t, err, "run %d: %#v", i, in)
				require.Equal(t, in, out, "run %d", i)
			}
		})
	}
}

// filler is a type in the tests that fills its unexported fields itself.
type filler interface {
	fill(r *rand.Rand)
}

// special builds random values of types from other packages whose
// fields fill cannot set, in forms their marshalers keep.
var special = map[reflect.Type]func(r *rand.Rand) any{
	typeOf[time.Time](): func(r *rand.Rand) any { return time.Unix(r.Int64N(1<<40)-1<<39, r.Int64N(1e9)) },
	typeOf[*big.Int](): func(r *rand.Rand) any {
		if r.IntN(4) == 0 {
			return (*big.Int)(nil)
		}
		return new(big.Int).Lsh(big.NewInt(r.Int64()), uint(r.IntN(100)))
	},
	typeOf[net.IP](): func(r *rand.Rand) any {
		if r.IntN(4) == 0 {
			return net.IP(nil)
		}
		return net.IPv4(byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()))
	},
}

const maxDepth = 3

// fill sets v, which is settable, to a random value: every field msgpack
// encodes gets one, fields left out stay zero, and interfaces get values
// whose generic decoding is the same Go value.
func fill(v reflect.Value, r *rand.Rand, depth int) {
	t := v.Type()
	if f, ok := special[t]; ok {
		v.Set(reflect.ValueOf(f(r)))
		return
	}
	if v.CanInterface() {
		if f, ok := v.Addr().Interface().(filler); ok {
			f.fill(r)
			return
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(r.Uint64()) >> r.IntN(64))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(r.Uint64() >> r.IntN(64))
	case reflect.Float32:
		v.SetFloat(float64(float32(r.NormFloat64() * 1e6)))
	case reflect.Float64:
		v.SetFloat(r.NormFloat64() * 1e12)
	case reflect.String:
		v.SetString(randomString(r))
	case reflect.Slice:
		if depth >= maxDepth || r.IntN(4) == 0 {
			return
		}
		n := r.IntN(4)
		v.Set(reflect.MakeSlice(t, n, n))
		for i := range n {
			fill(v.Index(i), r, depth+1)
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), r, depth+1)
		}
	case reflect.Map:
		if depth >= maxDepth || r.IntN(4) == 0 {
			return
		}
		v.Set(reflect.MakeMap(t))
		for range r.IntN(4) {
			k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			fill(k, r, depth+1)
			fill(e, r, depth+1)
			v.SetMapIndex(k, e)
		}
	case reflect.Pointer:
		if depth >= maxDepth || r.IntN(3) == 0 {
			return
		}
		v.Set(reflect.New(t.Elem()))
		fill(v.Elem(), r, depth+1)
		if t.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() {
			// msgpack writes a pointer to a nil pointer as nil.
			v.SetZero()
		}
	case reflect.Interface:
		fillInterface(v, r, depth)
	case reflect.Struct:
		fillStruct(v, r, depth)
	}
}

// fillStruct fills the fields of struct v that msgpack encodes.
func fillStruct(v reflect.Value, r *rand.Rand, depth int) {
	t := v.Type()
	omitAll := false
	if f, ok := t.FieldByName("_msgpack"); ok {
		omitAll = strings.Contains(f.Tag.Get("msgpack"), "omitempty")
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("msgpack")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		fv := v.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Pointer && !strings.Contains(tag, "noinline") {
			// msgpack inlines the fields; a nil pointer would come back
			// pointing to a zero struct.
			fv.Set(reflect.New(f.Type.Elem()))
			fill(fv.Elem(), r, depth+1)
			continue
		}
		fill(fv, r, depth+1)
		// omitempty turns an empty slice or map into nil.
		k := f.Type.Kind()
		if (omitAll || strings.Contains(tag, "omitempty")) && (k == reflect.Slice || k == reflect.Map) && fv.Len() == 0 {
			fv.SetZero()
		}
	}
}

// fillInterface sets an interface to nil or to a value that msgpack
// decodes back as the same Go value.
func fillInterface(v reflect.Value, r *rand.Rand, depth int) {
	if r.IntN(3) == 0 {
		return
	}
	switch v.Type() {
	case typeOf[any]():
		switch r.IntN(3) {
		case 0:
			v.Set(reflect.ValueOf(randomString(r)))
		case 1:
			v.Set(reflect.ValueOf(r.IntN(2) == 1))
		default:
			if depth < maxDepth {
				v.Set(reflect.ValueOf([]any{randomString(r), nil, 1.5}))
			}
		}
	case typeOf[error]():
		v.Set(reflect.ValueOf(errors.New(randomString(r))))
	}
}

func randomString(r *rand.Rand) string {
	b := make([]byte, r.IntN(8))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

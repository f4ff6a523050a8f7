package boxed

import (
	"fmt"
	"reflect"
	"unsafe"
)

// Boxer boxes values of T in interfaces that point at them.
type Boxer[T any] struct {
	typ unsafe.Pointer // the type word of an interface holding a T
}

// New returns a Boxer for T. T must be larger than a pointer: an
// interface holds a pointer-shaped value in its own word rather than
// pointing at it, and New refuses every type that small rather than
// tell the two kinds apart.
func New[T any]() Boxer[T] {
	var zero T
	if unsafe.Sizeof(zero) <= unsafe.Sizeof(uintptr(0)) {
		panic(fmt.Sprintf("boxed: %v fits in an interface's word", reflect.TypeFor[T]()))
	}
	var v any = zero
	return Boxer[T]{typ: (*eface)(unsafe.Pointer(&v)).typ}
}

// Box returns an interface holding *p that points at p rather than at
// a copy. *p must not be written to afterwards.
func (b Boxer[T]) Box(p *T) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = b.typ, unsafe.Pointer(p)
	return v
}

// eface is the layout of an empty interface.
type eface struct {
	typ, data unsafe.Pointer
}

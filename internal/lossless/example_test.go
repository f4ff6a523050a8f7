package lossless_test

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/actorsnap/actorsnap/internal/lossless"
)

// BankAccount keeps its history in an unexported field, which msgpack
// would skip.
type BankAccount struct {
	Owner   string
	Balance int
	//lint:ignore U1000 the field is what msgpack would lose.
	history []int
}

// Fixed leaves the history out on purpose.
type Fixed struct {
	Owner   string
	Balance int
	//lint:ignore U1000 the field is left out on purpose.
	history []int `msgpack:"-"`
}

func ExampleCheck() {
	hint := lossless.WithMarshalerHint("actors.StateMarshaler")
	err := lossless.Check(reflect.TypeFor[*BankAccount](), hint)
	fmt.Println(err)

	var le *lossless.Error
	if errors.As(err, &le) {
		fmt.Println(le.Path, le.FieldType, le.Reason)
	}

	fmt.Println(lossless.Check(reflect.TypeFor[*Fixed](), hint))
	// Output:
	// type lossless_test.BankAccount would lose field history (unexported, type []int): export it, tag it msgpack:"-" to leave it out on purpose, or implement actors.StateMarshaler on lossless_test.BankAccount
	// BankAccount.history []int unexported field
	// <nil>
}

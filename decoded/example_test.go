package decoded_test

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/decoded"
)

// An account's state in two snapshots, shown and compared without the
// Account type: only its msgpack encoding is needed.
func Example() {
	type Account struct {
		Balance int64
		Owner   string
	}
	before, _ := msgpack.Marshal(&Account{Balance: 762, Owner: "ann"})
	after, _ := msgpack.Marshal(&Account{Balance: 801, Owner: "ann"})

	a, b := decoded.Decode(before), decoded.Decode(after)
	fmt.Println(decoded.Format(a, 0))
	for _, c := range decoded.Diff(a, b, 0) {
		fmt.Println(c)
	}
	q, _ := decoded.ParseQuery("Balance > 800")
	fmt.Println(q, q.Match(a), q.Match(b))

	// A state that MarshalState wrote as JSON is not msgpack.
	fmt.Println(decoded.Format(decoded.Decode([]byte(`{"Balance":762}`)), 0))
	// Output:
	// {Balance: 762, Owner: "ann"}
	// Balance 762 -> 801
	// Balance > 800 false true
	// <15 bytes, not msgpack>
}

package decoded_test

import (
	"fmt"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/decoded"
)

// BenchmarkDecode decodes and formats one state, as `actorsnap show`
// does for each participant; msgpack.Unmarshal into the state's own type
// is measured in the same run as the baseline.
func BenchmarkDecode(b *testing.B) {
	type account struct {
		Balance int64
		Owner   string
		Opened  int64
		Frozen  bool
		History []int64
	}
	for _, n := range []int{0, 100} {
		state, err := msgpack.Marshal(&account{Balance: 762, Owner: "acct-00000", Opened: 1700000000, History: make([]int64, n)})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("bytes=%d/decode+format", len(state)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(state)))
			for b.Loop() {
				_ = decoded.Format(decoded.Decode(state), 80)
			}
		})
		b.Run(fmt.Sprintf("bytes=%d/baseline=msgpack.Unmarshal", len(state)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(state)))
			for b.Loop() {
				var a account
				if err := msgpack.Unmarshal(state, &a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package actors

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.ProtoActorTimers)
}

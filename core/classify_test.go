package core_test

import (
	"fmt"
	"testing"

	"github.com/keylock/keylock/core"
)

func TestErrorClassString(t *testing.T) {
	for c, want := range map[core.ErrorClass]string{
		core.ClassNone: "none", core.ClassInvalid: "invalid", core.ClassDeadline: "deadline",
		core.ClassCanceled: "canceled", core.ClassBusy: "busy", core.ClassUnavailable: "unavailable",
		core.ClassInternal: "internal", core.ErrorClass(99): "ErrorClass(99)",
	} {
		if got := fmt.Sprint(c); got != want {
			t.Errorf("fmt.Sprint(class %d) = %q, want %q", int(c), got, want)
		}
	}
}

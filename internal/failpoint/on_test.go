//go:build failpoints

package failpoint

import (
	"errors"
	"testing"
)

func TestArmAndInject(t *testing.T) {
	if err := Arm("walBeforeSync=error@2"); err != nil {
		t.Fatal(err)
	}
	defer Arm("")
	for i := 0; i < 2; i++ {
		if err := Inject(WALBeforeSync); err != nil {
			t.Fatalf("call %d fired early: %v", i+1, err)
		}
	}
	if err := Inject(WALBeforeSync); !errors.Is(err, ErrInjected) {
		t.Fatalf("third call: %v", err)
	}
	if err := Inject(RaftAfterSave); err != nil {
		t.Fatalf("unarmed point fired: %v", err)
	}
	for _, bad := range []string{"nope=error", "walBeforeSync", "walBeforeSync=boom", "walBeforeSync=error@x"} {
		if err := Arm(bad); err == nil {
			t.Errorf("Arm(%q) accepted", bad)
		}
	}
}

func TestHoldUntilDisarmed(t *testing.T) {
	if err := Arm("txnAfterPrepare=hold"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Inject(TxnAfterPrepare) }()
	select {
	case err := <-done:
		t.Fatalf("hold returned before it was released: %v", err)
	default:
	}
	if err := Arm(""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("released hold returned %v", err)
	}
}

// TestEveryNameArms: each listed point can be armed from the environment's
// syntax and fires after its count, the others staying quiet.
func TestEveryNameArms(t *testing.T) {
	defer Arm("")
	for _, name := range Names {
		if err := Arm(name + "=error@1"); err != nil {
			t.Fatalf("arm %s: %v", name, err)
		}
		if err := Inject(name); err != nil {
			t.Fatalf("%s fired on its first call, armed @1: %v", name, err)
		}
		for _, other := range Names {
			if other != name {
				if err := Inject(other); err != nil {
					t.Fatalf("%s fired while only %s was armed: %v", other, name, err)
				}
			}
		}
		if err := Inject(name); !errors.Is(err, ErrInjected) {
			t.Fatalf("%s, second call: %v, want ErrInjected", name, err)
		}
		if Calls(name) != 2 {
			t.Fatalf("%s: %d calls counted, want 2", name, Calls(name))
		}
	}
}

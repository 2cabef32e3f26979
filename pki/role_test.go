package pki

import (
	"errors"
	"testing"
)

func TestRoleOrder(t *testing.T) {
	roles := []Role{RoleNone, RoleRead, RoleWrite, RoleAdmin}
	for i, r := range roles {
		for j, need := range roles {
			if got, want := r.Includes(need), i >= j; got != want {
				t.Errorf("%v.Includes(%v) = %v, want %v", r, need, got, want)
			}
		}
	}
	for _, bad := range []Role{-1, RoleAdmin + 1, 100} {
		for _, r := range roles {
			if bad.Includes(r) || (r != RoleNone && r.Includes(bad)) || RoleAdmin.Includes(bad) {
				t.Errorf("%v and %v: a value that is no role includes or is included", bad, r)
			}
		}
	}
}

func TestParseRole(t *testing.T) {
	for _, r := range []Role{RoleRead, RoleWrite, RoleAdmin} {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v", r.String(), got, err)
		}
	}
	for _, s := range []string{"", "none", "Read", "ADMIN", " write", "write ", "root", "Role(1)"} {
		if r, err := ParseRole(s); !errors.Is(err, ErrInvalidRole) || r != RoleNone {
			t.Errorf("ParseRole(%q) = %v, %v; want ErrInvalidRole", s, r, err)
		}
	}
	if s := RoleNone.String(); s != "none" {
		t.Errorf("RoleNone = %q", s)
	}
	if s := Role(9).String(); s != "Role(9)" {
		t.Errorf("Role(9) = %q", s)
	}
}

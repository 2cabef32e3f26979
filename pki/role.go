package pki

import (
	"fmt"
)

// Role is what a client certificate allows (DESIGN.md, "Trust"). Roles are
// ordered: each one includes every role before it, so a method that needs
// RoleRead is allowed to a writer and to an admin.
type Role int

const (
	// RoleNone is the zero Role: no role, allowed nothing. A node
	// certificate has no role, and no certificate carries this one.
	RoleNone Role = iota
	// RoleRead allows reads: Get, Scan, read-only transactions, status.
	RoleRead
	// RoleWrite allows RoleRead and writes: Put, Delete, transactions.
	RoleWrite
	// RoleAdmin allows RoleWrite and the cluster's administration: cuts,
	// checkpoints, snapshots, restore.
	RoleAdmin
)

// roleNames are the names of the roles a certificate can carry, indexed
// by Role.
var roleNames = [...]string{RoleRead: "read", RoleWrite: "write", RoleAdmin: "admin"}

// ParseRole returns the role named s: exactly "read", "write" or "admin"
// (lower case, no spaces). Any other string, "none" included, is an error
// wrapping ErrInvalidRole.
func ParseRole(s string) (Role, error) {
	for r := RoleRead; r <= RoleAdmin; r++ {
		if s == roleNames[r] {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("%w %q: want read, write or admin", ErrInvalidRole, s)
}

// String returns the name ParseRole accepts, "none" for RoleNone, and
// "Role(n)" for a value that is no role.
func (r Role) String() string {
	switch {
	case r == RoleNone:
		return "none"
	case r.valid():
		return roleNames[r]
	default:
		return fmt.Sprintf("Role(%d)", int(r))
	}
}

// Includes reports whether r allows what need allows: r is need or comes
// after it. Every role includes RoleNone; a value that is no role
// (outside RoleNone..RoleAdmin) includes nothing and is included by
// nothing, so a corrupted Role cannot grant access.
func (r Role) Includes(need Role) bool {
	if (r != RoleNone && !r.valid()) || (need != RoleNone && !need.valid()) {
		return false
	}
	return r >= need
}

// valid reports whether r is one of the roles a certificate can carry.
func (r Role) valid() bool { return r >= RoleRead && r <= RoleAdmin }

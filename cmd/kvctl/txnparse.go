package main

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cutkv/cutkv/client"
)

// The text form of a transaction read by `kvctl txn` (docs/cli.md, "txn"):
//
//	# comment
//	ver(KEY) OP N          compares, one per line (OP: = != < >)
//	val(KEY) OP VALUE
//	                       a blank line
//	put KEY VALUE          the success ops, one per line
//	get KEY
//	del KEY
//	scan FROM [TO] [--limit N]
//	                       a blank line
//	...                    the failure ops
//
// Each blank line (nothing but spaces and tabs) ends a section, so two in a
// row make an empty one; comment lines do not count. KEY, VALUE, FROM and
// TO are bare words (their raw bytes, no '"', up to a space or tab; a key in
// ver()/val() also ends at ')') or double-quoted Go strings ("a b",
// "a\x00b"). A bare word that starts with '#' starts a comment.

// txnSpec is a parsed transaction.
type txnSpec struct {
	cmps     []client.Cmp
	branches [2][]txnOp // success, failure
}

// txnOp is a parsed op with the line it came from.
type txnOp struct {
	line       int
	kind       client.OpKind
	key, value []byte // scan: key is FROM
	end        []byte // scan: TO, nil when absent
	limit      int
}

func (o txnOp) op() client.Op {
	switch o.kind {
	case client.KindGet:
		return client.OpGet(o.key)
	case client.KindPut:
		return client.OpPut(o.key, o.value)
	case client.KindDelete:
		return client.OpDelete(o.key)
	}
	return client.OpScan(o.key, o.end, o.limit)
}

func (s *txnSpec) ops(branch int) []client.Op {
	out := make([]client.Op, 0, len(s.branches[branch]))
	for _, o := range s.branches[branch] {
		out = append(out, o.op())
	}
	return out
}

// parseError is a mistake in the text, with its 1-based line number.
type parseError struct {
	line int
	msg  string
}

func (e *parseError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

var sectionNames = [...]string{"compares", "success ops", "failure ops"}

// parseTxn parses the text form of a transaction.
func parseTxn(src []byte) (*txnSpec, error) {
	spec := &txnSpec{}
	section := 0
	for i, raw := range bytes.Split(src, []byte("\n")) {
		n := i + 1
		line := strings.Trim(strings.TrimSuffix(string(raw), "\r"), " \t")
		switch {
		case line == "":
			section++
			continue
		case line[0] == '#':
			continue
		}
		fail := func(err error) error { return &parseError{line: n, msg: err.Error()} }
		switch section {
		case 0:
			cmp, err := parseCompare(line)
			if err != nil {
				return nil, fail(err)
			}
			spec.cmps = append(spec.cmps, cmp)
		case 1, 2:
			op, err := parseOp(line, sectionNames[section])
			if err != nil {
				return nil, fail(err)
			}
			op.line = n
			spec.branches[section-1] = append(spec.branches[section-1], op)
		default:
			return nil, fail(errors.New("a fourth section: a transaction is compares, a blank line, success ops, a blank line, failure ops (comment lines, unlike blank ones, may separate lines within a section)"))
		}
	}
	for _, ops := range spec.branches {
		if err := checkBranch(ops); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// checkBranch refuses, with line numbers, a branch that writes a key twice
// or reads a key it writes (the server would refuse it: InvalidArgument).
func checkBranch(ops []txnOp) error {
	for i, w := range ops {
		if w.kind != client.KindPut && w.kind != client.KindDelete {
			continue
		}
		for j, o := range ops {
			if j == i {
				continue
			}
			switch o.kind {
			case client.KindPut, client.KindDelete:
				if j < i && bytes.Equal(o.key, w.key) {
					return &parseError{w.line, fmt.Sprintf("%s writes %s, which line %d already writes: a branch writes a key at most once", w.kind, client.QuoteKey(w.key), o.line)}
				}
			case client.KindGet:
				if bytes.Equal(o.key, w.key) {
					return &parseError{o.line, fmt.Sprintf("get reads %s, which line %d writes: a branch may not read a key it writes", client.QuoteKey(o.key), w.line)}
				}
			case client.KindScan:
				if bytes.Compare(w.key, o.key) >= 0 && (len(o.end) == 0 || bytes.Compare(w.key, o.end) < 0) {
					return &parseError{o.line, fmt.Sprintf("scan covers %s, which line %d writes: a branch may not read a key it writes", client.QuoteKey(w.key), w.line)}
				}
			}
		}
	}
	return nil
}

var opNames = map[string]client.OpKind{"put": client.KindPut, "get": client.KindGet, "del": client.KindDelete, "delete": client.KindDelete, "scan": client.KindScan}

// parseCompare parses `ver(KEY) OP N` or `val(KEY) OP VALUE`; line is
// trimmed and not empty.
func parseCompare(line string) (client.Cmp, error) {
	var target func([]byte) client.CmpTarget
	switch {
	case strings.HasPrefix(line, "ver("):
		target = client.Version
	case strings.HasPrefix(line, "val("):
		target = client.Value
	default:
		if w := strings.Fields(line)[0]; opNames[w] != 0 {
			return client.Cmp{}, fmt.Errorf("%q is an op, but compares come first: write the compares, a blank line, then the success ops (start with a blank line when there are no compares)", w)
		}
		return client.Cmp{}, fmt.Errorf("want a compare, ver(KEY) OP N or val(KEY) OP VALUE, not %q", line)
	}
	rest := skipBlanks(line[4:])
	key, quoted, rest, err := scanWord(rest, ")")
	switch {
	case err != nil:
		return client.Cmp{}, err
	case len(key) == 0 && !quoted:
		return client.Cmp{}, fmt.Errorf("missing key in %s", line[:3]+"()")
	}
	if err := checkKey(key); err != nil {
		return client.Cmp{}, err
	}
	rest = skipBlanks(rest)
	if !strings.HasPrefix(rest, ")") {
		return client.Cmp{}, errors.New("missing ')' after the key (quote a key that holds spaces or ')')")
	}
	rest = skipBlanks(rest[1:])
	end := 0
	for end < len(rest) && strings.IndexByte("=!<>", rest[end]) >= 0 {
		end++
	}
	op := rest[:end]
	switch op {
	case "=", "!=", "<", ">":
	case "":
		return client.Cmp{}, errors.New("missing operator after ')': want =, !=, < or >")
	default:
		return client.Cmp{}, fmt.Errorf("unknown operator %q: want =, !=, < or >", op)
	}
	words, err := tokenize(rest[end:])
	if err != nil {
		return client.Cmp{}, err
	}
	switch {
	case len(words) == 0:
		return client.Cmp{}, fmt.Errorf("missing operand after %q", op)
	case len(words) > 1:
		return client.Cmp{}, fmt.Errorf("unexpected %q after the operand (quote a value that holds spaces)", words[1].text)
	}
	w := words[0].text
	if line[:3] == "ver" {
		v, err := strconv.ParseInt(string(w), 10, 64)
		if err != nil || v < 0 {
			return client.Cmp{}, fmt.Errorf("version %q is not an integer ≥ 0", w)
		}
		return client.Compare(target(key), op, v), nil
	}
	if len(w) > client.MaxValueSize {
		return client.Cmp{}, fmt.Errorf("value is %d bytes, more than %d", len(w), client.MaxValueSize)
	}
	return client.Compare(target(key), op, w), nil
}

// parseOp parses an op line (trimmed, not empty) of the named section.
func parseOp(line, section string) (txnOp, error) {
	if strings.HasPrefix(line, "ver(") || strings.HasPrefix(line, "val(") {
		return txnOp{}, fmt.Errorf("a compare among the %s: compares come before the first blank line", section)
	}
	words, err := tokenize(line)
	if err != nil {
		return txnOp{}, err
	}
	name := string(words[0].text)
	kind := opNames[name]
	if kind == 0 || words[0].quoted {
		return txnOp{}, fmt.Errorf("unknown op %q: want put, get, del or scan", words[0].text)
	}
	args := words[1:]
	o := txnOp{kind: kind}
	switch kind {
	case client.KindPut:
		if len(args) != 2 {
			return txnOp{}, fmt.Errorf("put takes KEY VALUE, got %d words (quote a value that holds spaces)", len(args))
		}
		o.key, o.value = args[0].text, args[1].text
		if len(o.value) > client.MaxValueSize {
			return txnOp{}, fmt.Errorf("value is %d bytes, more than %d", len(o.value), client.MaxValueSize)
		}
	case client.KindGet, client.KindDelete:
		if len(args) != 1 {
			return txnOp{}, fmt.Errorf("%s takes one KEY, got %d words", name, len(args))
		}
		o.key = args[0].text
	case client.KindScan:
		return parseScan(args)
	}
	return o, checkKey(o.key)
}

// parseScan parses the words after `scan`: FROM [TO] [--limit N].
func parseScan(args []word) (txnOp, error) {
	o := txnOp{kind: client.KindScan}
	var bounds [][]byte
	for i := 0; i < len(args); i++ {
		a := args[i]
		s := string(a.text)
		if a.quoted || !strings.HasPrefix(s, "--") {
			bounds = append(bounds, a.text)
			continue
		}
		var v string
		switch {
		case s == "--limit" && i+1 < len(args):
			i++
			v = string(args[i].text)
		case s == "--limit":
			return txnOp{}, errors.New("--limit needs a number")
		case strings.HasPrefix(s, "--limit="):
			v = strings.TrimPrefix(s, "--limit=")
		default:
			return txnOp{}, fmt.Errorf("unknown scan flag %q: want --limit N (quote a bound that starts with --)", s)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return txnOp{}, fmt.Errorf("invalid --limit %q: want a number ≥ 0 (0: the server's maximum)", v)
		}
		o.limit = n
	}
	switch len(bounds) {
	case 0:
		return txnOp{}, errors.New(`scan takes FROM [TO]; FROM "" starts at the first key`)
	case 1, 2:
	default:
		return txnOp{}, fmt.Errorf("scan takes FROM [TO], got %d bounds (quote a bound that holds spaces)", len(bounds))
	}
	o.key = bounds[0]
	if len(bounds) == 2 {
		o.end = bounds[1]
	}
	return o, nil
}

func checkKey(k []byte) error {
	switch {
	case len(k) == 0:
		return errors.New("empty key")
	case len(k) > client.MaxKeySize:
		return fmt.Errorf("key is %d bytes, more than %d", len(k), client.MaxKeySize)
	}
	return nil
}

// word is a bare or quoted word of a line.
type word struct {
	text   []byte
	quoted bool
}

// tokenize splits s into words, up to a comment.
func tokenize(s string) ([]word, error) {
	var words []word
	for {
		s = skipBlanks(s)
		if s == "" || s[0] == '#' {
			return words, nil
		}
		w, quoted, rest, err := scanWord(s, "")
		if err != nil {
			return nil, err
		}
		words = append(words, word{w, quoted})
		s = rest
	}
}

// scanWord reads the word at the start of s, a bare word or a quoted Go
// string; a bare word also ends at any byte of stop. It returns the word
// and the rest of s.
func scanWord(s, stop string) (w []byte, quoted bool, rest string, err error) {
	if strings.HasPrefix(s, `"`) {
		end := 1
		for ; end < len(s) && s[end] != '"'; end++ {
			if s[end] == '\\' {
				end++
			}
		}
		if end >= len(s) {
			return nil, false, "", fmt.Errorf("unterminated quoted string %s", s)
		}
		q := s[:end+1]
		if !utf8.ValidString(q) {
			return nil, false, "", errors.New("bytes that are not UTF-8 inside a quoted string: write them as \\xHH")
		}
		u, err := strconv.Unquote(q)
		if err != nil {
			return nil, false, "", fmt.Errorf("bad quoted string %s: %v", q, err)
		}
		rest = s[end+1:]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' && strings.IndexByte(stop, rest[0]) < 0 {
			return nil, false, "", fmt.Errorf("unexpected %q right after the quoted string %s", rest[0], q)
		}
		return []byte(u), true, rest, nil
	}
	end := 0
	for end < len(s) && s[end] != ' ' && s[end] != '\t' && strings.IndexByte(stop, s[end]) < 0 {
		if s[end] == '"' {
			return nil, false, "", fmt.Errorf("a quote inside the bare word %s: quote the whole word", s[:strings.IndexAny(s+" ", " \t")])
		}
		end++
	}
	return []byte(s[:end]), false, s[end:], nil
}

func skipBlanks(s string) string { return strings.TrimLeft(s, " \t") }

package main

import "testing"

func TestReplaceSection(t *testing.T) {
	const sec = "## T\n\nnew\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"empty", "", sec},
		{"append", "# Doc\n\ntext", "# Doc\n\ntext\n\n" + sec},
		{"replace last", "# Doc\n\n## T\n\nold\n", "# Doc\n\n" + sec},
		{"replace middle", "# Doc\n\n## T\n\nold\n### sub\n\n## Next\nx\n", "# Doc\n\n" + sec + "\n## Next\nx\n"},
		{"heading in fence", "## T\n\n```\n## not a heading\n```\n## Next\n", sec + "\n## Next\n"},
		{"other title", "## T2\n\nkeep\n", "## T2\n\nkeep\n\n" + sec},
	} {
		if got := replaceSection(tc.doc, "T", sec); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFmtOps(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999.4: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := fmtOps(v); got != want {
			t.Errorf("fmtOps(%v) = %q, want %q", v, got, want)
		}
	}
}

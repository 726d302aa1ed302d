package demo

import (
	"fmt"
	"io"
)

// printer writes the demo's narration, coloured on a terminal.
type printer struct {
	w     io.Writer
	color bool
}

const (
	bold   = "\x1b[1m"
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	reset  = "\x1b[0m"
)

func (p *printer) paint(code, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if p.color {
		s = code + s + reset
	}
	fmt.Fprintln(p.w, s)
}

func (p *printer) title(s string)                  { fmt.Fprintln(p.w); p.paint(bold, "=== %s ===", s) }
func (p *printer) line(format string, args ...any) { fmt.Fprintf(p.w, format+"\n", args...) }
func (p *printer) good(format string, args ...any) { p.paint(green, format, args...) }
func (p *printer) bad(format string, args ...any)  { p.paint(red, format, args...) }
func (p *printer) warn(format string, args ...any) { p.paint(yellow, format, args...) }

// ledger prints the provider's ledger.
func (p *printer) ledger(path string) {
	ps, err := Payments(path)
	if err != nil {
		p.bad("  provider ledger unreadable: %v", err)
		return
	}
	p.line("  payment provider's ledger:")
	for _, r := range ps {
		key := r.IdempotencyKey
		if key == "" {
			key = "none"
		} else if len(key) > 12 {
			key = key[:12] + "…"
		}
		p.line("    $%s -> %s  (%s, idempotency key %s)", dollars(r.Amount), r.Invoice, r.PaymentID, key)
	}
}

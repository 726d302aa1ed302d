package badgerstore

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"
)

// zerologAdapter routes Badger's printf-style log calls to a zerolog logger.
type zerologAdapter struct{ l zerolog.Logger }

func (a zerologAdapter) Errorf(format string, args ...any) { a.log(a.l.Error(), format, args) }

func (a zerologAdapter) Warningf(format string, args ...any) { a.log(a.l.Warn(), format, args) }

func (a zerologAdapter) Infof(format string, args ...any) { a.log(a.l.Info(), format, args) }

func (a zerologAdapter) Debugf(format string, args ...any) { a.log(a.l.Debug(), format, args) }

func (zerologAdapter) log(ev *zerolog.Event, format string, args []any) {
	if ev == nil { // level disabled
		return
	}
	ev.Msg(strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

//go:build !linux

package badgerstore

import "os"

func mapHWM(*os.File) []byte { return nil }

func syncHWM(h *hwmFile) error { return h.f.Sync() }

func unmapHWM(*hwmFile) {}

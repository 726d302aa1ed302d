package badger

// cairnOptions are the options Cairn added (see CAIRN-PATCHES.md).
type cairnOptions struct {
	// DetectLogDamage makes the replay of a memtable WAL at open fail with
	// a *CorruptError when a damaged record is followed by a valid record
	// of another transaction (damage to synced data), instead of treating
	// the damage as the end of the log.
	DetectLogDamage bool

	// ManifestMinSize, when positive, is the number of bytes of the
	// MANIFEST known to have been synced: Open fails with a *CorruptError
	// if fewer bytes replay as valid change sets.
	ManifestMinSize int64

	// OnManifestWrite, when set, is called after every synced change to
	// the MANIFEST with the file's new size, and with 0 just before the
	// file is rewritten (its size then shrinks). It runs on the goroutine
	// that changed the manifest (flush or compaction), with the manifest
	// locked; an error fails that change.
	OnManifestWrite func(size int64) error
}

// WithDetectLogDamage returns a new Options value with DetectLogDamage set.
func (opt Options) WithDetectLogDamage(val bool) Options {
	opt.DetectLogDamage = val
	return opt
}

// WithManifestMinSize returns a new Options value with ManifestMinSize set.
func (opt Options) WithManifestMinSize(size int64) Options {
	opt.ManifestMinSize = size
	return opt
}

// WithOnManifestWrite returns a new Options value with OnManifestWrite set.
func (opt Options) WithOnManifestWrite(fn func(size int64) error) Options {
	opt.OnManifestWrite = fn
	return opt
}

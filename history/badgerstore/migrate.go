package badgerstore

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/third_party/badger"
)

// migrateKey holds the last record key migrated from format 1, so that a
// migration cut short by a crash goes on where it stopped instead of
// sealing a record twice.
var migrateKey = []byte("\x00cairn.migrate")

// migrateBatch is how many records one migration transaction rewrites.
const migrateBatch = 512

// migrateV1 seals every record of a format-1 database (which stored record
// values without a checksum) in its envelope, in transactions of
// migrateBatch records, and then sets the format to 2. Events are already
// checksummed and stay as they are.
func migrateV1(db *badger.DB) error {
	var after []byte
	err := db.View(func(txn *badger.Txn) error {
		v, found, err := getRaw(txn, migrateKey)
		if found {
			after = v
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("badgerstore: migrate: %w", err)
	}
	for {
		keys, values, err := nextToMigrate(db, after)
		if err != nil {
			return fmt.Errorf("badgerstore: migrate: %w", err)
		}
		done := len(keys) < migrateBatch
		err = db.Update(func(txn *badger.Txn) error {
			for i, k := range keys {
				if err := txn.Set(k, seal(k, values[i])); err != nil {
					return err
				}
			}
			if done {
				if err := txn.Delete(migrateKey); err != nil {
					return err
				}
				return txn.Set(formatKey, formatVersion)
			}
			return txn.Set(migrateKey, keys[len(keys)-1])
		})
		if err != nil {
			return fmt.Errorf("badgerstore: migrate: %w", writeError(err))
		}
		if done {
			return nil
		}
		after = keys[len(keys)-1]
	}
}

// nextToMigrate returns up to migrateBatch record keys after after (all
// record spaces, in key order) with their stored values.
func nextToMigrate(db *badger.DB, after []byte) (keys, values [][]byte, err error) {
	// The spaces' prefixes in byte order, which after's order follows.
	var prefixes []byte
	for sp := history.Space(1); sp.Valid(); sp++ {
		p, _ := spacePrefix(sp)
		prefixes = append(prefixes, p)
	}
	slices.Sort(prefixes)
	err = db.View(func(txn *badger.Txn) error {
		for _, p := range prefixes {
			if len(keys) >= migrateBatch {
				break
			}
			prefix := []byte{p}
			if after != nil && after[0] > p {
				continue
			}
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			start := prefix
			if after != nil && after[0] == p {
				start = after
			}
			for it.Seek(start); it.Valid() && len(keys) < migrateBatch; it.Next() {
				k := it.Item().KeyCopy(nil)
				if after != nil && bytes.Equal(k, after) {
					continue
				}
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					it.Close()
					return readError("read record to migrate", err)
				}
				keys, values = append(keys, k), append(values, v)
			}
			err := it.Err()
			it.Close()
			if err != nil {
				return readError("read records to migrate", err)
			}
		}
		return nil
	})
	return keys, values, err
}

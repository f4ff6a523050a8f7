// Package persistence stores complete global snapshots. A Store saves a
// snapshot atomically (wholly visible or absent), loads it by id or the
// latest, lists, deletes and keeps only the newest N.
//
// # Stores
//
//   - FileStore, the embedded default: a directory on local disk (Open).
//   - Memory, for tests and for systems that need their snapshots only
//     while they run (NewMemory).
//   - Other stores (PostgreSQL, for clusters whose members share storage)
//     plug in with RegisterScheme; OpenURL opens any of them by URL, a
//     path or file:// URL meaning a FileStore.
//
// Every store follows the contract written on Store, which the package
// storetest checks: any method may run concurrently with any other, on one
// store or on several sharing storage (two processes on one directory);
// two Saves of one id race safely, one winning and the others getting
// ErrExists; a Global given to Save must not be changed afterwards, and
// the byte slices of one returned by Load must not be changed.
//
// Messages in flight are stored as RecordedMessage payloads (a registered
// type name and the message's encoding; package actors makes them). A
// snapshot holding any other payload is refused with ErrPayloadType, by
// every store.
//
// # Security
//
// A snapshot holds whatever its actors hold in memory (balances, user
// data, credentials), and restoring one makes it the system's state. So:
//
//   - A FileStore is private by default: it creates its directories 0700
//     and its files 0600 (DefaultPermissions; WithPermissions lets the
//     group or others read them), and refuses to write
//     (ErrWritableByOthers) into a directory that users other than its
//     owner may write to, unless opened WithWritableByOthers.
//   - Whatever prints or logs where a store is prints Redact of its URL,
//     which masks a password in it (user:password@, password=).
//   - Checksums (CRC-32C) catch accidents, not changes made on purpose: a
//     snapshot rewritten with its checksums recomputed loads. A store
//     given a Keyring (WithKeyring, Authenticate) keeps beside each
//     snapshot it saves an HMAC-SHA256 of the snapshot's stored form, and
//     the id of the key that made it, and refuses to load (*AuthError,
//     ErrUnauthentic) a snapshot whose MAC does not match, whose key it
//     does not hold, or, if the Keyring requires signatures, that has no
//     MAC. Keys rotate: the Keyring's first key signs, the others still
//     check what they signed. Snapshots saved without a key (by an earlier
//     build, in any format version) load unless signatures are required.
//     Memory keeps no MAC: nothing it holds outlives the process.
//
// The MAC shows that a snapshot is, whole, one that a holder of the key
// saved under that id. It does not hide a snapshot's content (the file
// permissions and the database's do), nor show that a snapshot is the
// newest, nor that none was deleted, nor stop a holder of the key. See
// docs/security.md in the repository for the threat model.
//
// # Ownership
//
// A store holds the snapshots of one system. A system claims its store
// (Store.Claim) before it saves: a new system (ClaimNew) is refused with
// ErrOwned once the store holds or has held any snapshot, so two systems
// never mix their snapshots in one store; a restore (ClaimRestore) takes
// the store over and continues its snapshots. A second system shares a
// store through a namespace of its own (WithNamespace, InNamespace): a
// store beside the first, with its own owner.
//
// A claim is recorded (Ownership shows it, as ls does) and gives a Lease:
// while it is held no other claim succeeds (ErrLocked), and Saves through
// other Store values are refused with ErrLocked, so two live writers
// cannot interleave even when started by mistake. The lease also carries
// the highest id the store has held, damaged, deleted and set-aside
// snapshots included: the claimant numbers its snapshots after it, so ids
// never repeat.
//
// # Damage
//
// Entries lists everything in the store's place for snapshots, each
// complete snapshot and, with its Damage, each entry that is not one: a
// save cut short, a damaged or unreadable manifest, a file, FIFO or link
// where a snapshot directory should be, a name the store does not use
// (ErrForeign). One damaged entry never fails Entries or List, never
// hides another, and never stops Latest (which passes over entries that
// are not complete snapshots, and reports damage in the data of the newest
// complete one), Save or Retain. Only regular files are opened (a FIFO or
// device in a snapshot's place is reported with ErrNotRegular and never
// read), and every read is bounded by the size the manifest gives or a
// format limit. SetAside moves a damaged entry out of the way, keeping it
// for inspection.
//
// # On-disk layout
//
// A FileStore directory holds one directory per complete snapshot, named
// by its id in 20 decimal digits so that names sort as ids do:
//
//	DIR/
//	  OWNER                         the owner: system name, generation,
//	                                host, pid, time of the claim, and the
//	                                highest id once the newest is deleted
//	  snap-00000000000000000042/    snapshot 42
//	    global.dat                  the snapshot, as EncodeGlobal writes it
//	    MAC                         with a Keyring only: the key id and the
//	                                MAC of the snapshot (see Format)
//	    MANIFEST                    written last: the id, and each data
//	                                file's name, size and CRC-32C (MAC's
//	                                too)
//	  .tmp-00000000000000000043-<random>/   a save in progress (or crashed)
//	  .del-snap-00000000000000000040-<random>/  a snapshot being deleted
//	  .damaged-snap-00000000000000000041-<random>/  set aside (SetAside)
//	  namespaces/NAME/              a namespace, laid out as DIR
//
// Directories are created 0700 and files 0600 unless WithPermissions says
// otherwise. Save creates a temporary directory with a name of its own and
// the files in it (checking and encoding the snapshot meanwhile, on two
// other goroutines; a snapshot that fails the check is refused before
// anything is written, and the directory removed), writes global.dat (and
// computes its MAC meanwhile, with a Keyring), then MAC and MANIFEST,
// fsyncs the files and the temporary directory (all at once, so that the
// file system commits its journal once for them), renames the
// directory to its snap- name and fsyncs DIR. Nothing in the temporary directory is visible before the
// rename, so the manifest never vouches for data that is not durable. The
// rename is the commit: it is atomic, and it fails if the snap- directory
// exists, so concurrent saves of one id (in one process or several) cannot
// both succeed nor mix their files, and no lock is needed.
// When Save returns nil the snapshot survives a crash.
//
// OWNER is written when a system claims the store, and when Delete
// removes the snapshot with the highest id, each time to a temporary file
// that is synced and renamed into place. The highest id the store has
// held is the largest of OWNER's and of the ids in the directory's names
// (snap-, .tmp-, .del- and .damaged- names in the forms above; any other
// name carries no id). A lease is a flock(2) of DIR itself, exclusive; a
// Save, Delete or Retain without a lease takes it shared for its length.
// A directory is locked rather than a lock file, which could be deleted
// while held. The lock belongs to the open file, so the operating system
// releases it when the process dies: a crashed writer never blocks its
// restore.
//
// A snap- directory whose MANIFEST is missing or does not verify is not a
// snapshot: List and Latest skip it, Entries lists it with its damage, and
// Load reports it as corrupt. A snapshot
// whose manifest verifies but whose data does not (a checksum, size or
// decoding fault) is reported by Load and Latest as a *CorruptError naming
// the file and byte offset, never loaded, and never skipped silently by
// Latest (a restore should not quietly go back further than asked); so is
// one a Keyring refuses, as an *AuthError. Retain counts a snapshot as
// complete only once its data checksums (and, with a Keyring, its MAC)
// verify, and deletes only snapshots older than the newest n complete
// ones.
//
// Delete renames the snapshot's directory to a .del- name before removing
// its files, so a snapshot disappears wholly and at once. Open removes
// .del- directories, and .tmp- directories older than a grace period
// (DefaultTempGrace, see WithTempGrace): a younger one may belong to a save
// still running in another process. A temporary directory is claimed by
// renaming it before its removal, so a slow save racing the cleanup either
// commits first or fails cleanly.
//
// # Format
//
// Both files share one envelope, the same in every format version: an
// 8-byte magic ("ASNAPGLB" for a snapshot, "ASNAPMAN" for a manifest), the
// format version as a big-endian uint16 (FormatVersion, now 5), a msgpack
// body, and the CRC-32C (Castagnoli) of everything before it as a
// big-endian uint32. The body of a snapshot, version 5, is the array
//
//	[id, mode, start seconds, start nanoseconds, end seconds, end nanoseconds,
//	 [[process id, kind, state (bin or nil), departed, waits (only if any)], ...],
//	 in-flight message count,
//	 [[from, to, sent, received, [[message type, message data (bin or nil)], ...]], ...],
//	 [[invariant, error], ...],
//	 receiver counts: nil, or [sent to, received, sent to, received, ...],
//	 sums: nil, or [sent, received]]
//
// with times in Unix seconds and nanoseconds (kept as instants, in UTC).
// A participant whose Waits is nil has four fields, as in version 2; one
// with Waits (even empty) has a fifth,
//
//	[any, timer, [[target, request, type, since seconds, since nanoseconds], ...]]
//
// its wait-for edges in their order. So waits cost nothing where there are
// none: a snapshot without waits, violations, receiver counts or sums is
// three bytes longer than in version 2 (the violations' empty array and
// two nils), whatever its size. A channel's
// from and to, and a wait's target, are the index of the participant (an
// unsigned integer) or, for a process that is not a participant, its
// name (a channel nothing crossed may have one; a wait may be for any
// process). Message sequence numbers are not stored: Verify holds them to
// received+1 onwards. The violations are the snapshot's, in their order,
// an empty array when there are none. The receiver counts are nil unless
// Global.ReceiverCounts, else two numbers per participant in its order,
// its SentTo and its Received: an epoch snapshot lists only the channels
// with messages in flight, and these let the decoder's Verify find one
// left out. The sums are nil unless the snapshot was counted in sums
// (Global.Sums), else what was sent before the records and what was
// received before them: Verify holds them to the messages in flight,
// which finds a channel, or a message, left out of such a snapshot. The
// manifest's body is [id, [[name, size, crc32c], ...]].
//
// The MAC file shares the envelope too (magic "ASNAPMAC"); its body is
// [id, key id, mac]. The MAC is HMAC-SHA256, under the key the key id
// names, of: "actorsnap snapshot MAC 1" and a zero byte; the layout name
// "file" and the key id, each as a byte of length and its bytes; the
// snapshot id (8 bytes); then, for each file the manifest lists other
// than MAC, in its order, the name's length (4 bytes), the name, the size
// (8 bytes) and the file's bytes (all numbers big-endian). So it covers
// every byte that defines the snapshot (its states, counters and messages
// in flight all live in global.dat), the manifest's list of files, and
// binds the MAC to its snapshot id and key id: a MAC moved to another
// snapshot, or a key id changed, fails too. The manifest lists MAC as a
// data file, so a build without keys checks its checksum and loads the
// snapshot as before; the format version does not change.
//
// Earlier builds wrote versions 1 to 4, which this one still reads.
// Version 4 differs from version 5 only in the snapshot's body: 11 fields,
// without the sums, so a snapshot of it loads without them.
// Version 3 differs from version 4 only in the snapshot's body: 10 fields,
// without the receiver counts, so a snapshot of it loads without them
// (Verify then checks its channels alone). Versions 1 and 2 keep no waits
// or violations either, so a snapshot of either loads with none. Version
// 2 differs from version 3 only in the snapshot's body: 9 fields, without
// the violations, and participants of four fields only.
// Version 1 differs from version 2 in turn: 8 fields, without the message
// count, and a channel's ends are always names.
//
// Decoding trusts nothing: the checksum is checked first (the FileStore
// checks it on another goroutine while it decodes, and uses the result
// only if it matches), every length is bounded by the format limits
// (MaxParticipants, MaxStateSize, MaxWaits, MaxViolationSize and the
// others) and by the bytes remaining before anything is allocated for it,
// and the decoded snapshot must pass what Verify checks. The decoder
// checks that as it goes, with a comparison per participant and channel
// (from version 2 a channel's ends are participants by construction and
// compare as integers), and checks the receiver counts with
// Global.VerifyReceivers, Verify's own check of them; where its
// check cannot vouch for the snapshot it runs Verify itself, and under the
// race detector or the invariants build tag it runs Verify always and
// panics if the two disagree. Bytes of another format version are refused
// with ErrFormatVersion.
//
// The codec is written by hand over bytes in memory. Decoding versions 2
// to 4 allocates the participants, the channels, the messages and their
// payloads as one slice each, and the waits and their edges in a few
// blocks; DecodeGlobal copies names into a few shared blocks, and the
// FileStore's Load lets names, states and message data share the one
// buffer it read the file into. A wait's target given by index is named
// once all the participants are decoded, and shares its participant's id.
//
// # Testing
//
// A FileStore works through an FS. MemFS simulates a crash (only synced
// data and synced directory entries survive) and ErrorFS fails a chosen
// operation; the package's tests crash and fail every operation of a save
// with them.
package persistence

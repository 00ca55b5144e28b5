//! Shared memory without preload (guide, "Old snapshots"): one dynamic shared memory segment,
//! made by the first backend that needs it and pinned until the server stops, for the parts that
//! must be shared in every install.
//!
//! Without `shared_preload_libraries` the server reserves no memory for the library, and
//! PostgreSQL 15 has no registry of named segments. So backends find the segment through a file,
//! `pg_stat_tmp/pg_jobqueue.segment` in the data directory (the directory PostgreSQL keeps for its
//! own and its extensions' temporary files, left out of base backups): the segment's handle, and a
//! nonce that the segment's header repeats. The file is read, and the segment made, under an
//! exclusive lock on the file, so two backends never make two. A handle left from before a
//! restart names no segment (a restart, or a crash, destroys them all), or one whose header does
//! not match; the next backend then makes a new segment and writes its handle.
//!
//! A backend attaches once, on first use, and keeps its mapping until it exits; the segment lives
//! until the server stops, so a segment is made once per server start.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};

use pgrx::pg_sys;

/// Where backends find the segment, relative to the data directory (every backend's working
/// directory).
const FILE: &str = "pg_stat_tmp/pg_jobqueue.segment";

/// The first word of the segment: it is one of ours.
const MAGIC: u64 = 0x6a71_7365_676d_0001;

#[repr(C)]
struct Header {
    magic: u64,
    /// The layout of what follows (`attach`'s `layout`): a library whose parts are laid out
    /// otherwise makes a segment of its own rather than misread this one.
    layout: u64,
    nonce: u64,
    reserved: u64,
}

/// Where the parts start: after the header, aligned for any of their fields.
pub const PARTS: usize = 64;

const UNTRIED: u8 = 0;
const ATTACHED: u8 = 1;
const FAILED: u8 = 2;

thread_local! {
    /// This backend's attempt: untried, attached, or failed (then it does not try again).
    static STATE: Cell<u8> = const { Cell::new(UNTRIED) };
}

/// Whether this backend is attached to the segment, attaching it on first use: `size` bytes of
/// parts (from `PARTS` on), laid out as `layout` says, handed to `init` with whether they were just
/// made (zeroed). Inside a transaction, never from a commit or abort callback. A failure (no room
/// for another segment, an unreadable file) is logged and leaves this backend without the segment;
/// a cancel or the server running out of memory ends the statement, and the next call tries again.
pub fn attach(size: usize, layout: u64, init: impl FnOnce(*mut u8, bool)) -> bool {
    match STATE.with(Cell::get) {
        ATTACHED => return true,
        FAILED => return false,
        _ => {}
    }
    // SAFETY: a plain read of a process global: a single-user backend has no other backends to
    // share with.
    if !unsafe { pg_sys::IsUnderPostmaster } {
        STATE.with(|state| state.set(FAILED));
        return false;
    }
    let found = crate::db::in_subtransaction(|| Ok(find_or_make(PARTS + size, layout)));
    let (base, new) = match found {
        Ok(Ok(found)) => found,
        Ok(Err(why)) | Err(why) => {
            pgrx::log!("pg_jobqueue: no shared memory without preload in this session ({why}): claims walk from their queue's start");
            STATE.with(|state| state.set(FAILED));
            return false;
        }
    };
    // SAFETY: `base` is the start of a mapping of at least PARTS + size bytes that this backend
    // keeps until it exits.
    init(unsafe { base.add(PARTS) }, new);
    STATE.with(|state| state.set(ATTACHED));
    true
}

/// The segment's address and whether it was just made, under the file's lock.
fn find_or_make(size: usize, layout: u64) -> Result<(*mut u8, bool), String> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(FILE)
        .map_err(|e| format!("{FILE}: {e}"))?;
    file.lock().map_err(|e| format!("{FILE}: {e}"))?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(|e| format!("{FILE}: {e}"))?;
    if let Some(base) = parse(&text).and_then(|(handle, nonce)| existing(handle, nonce, size, layout)) {
        return Ok((base, false));
    }
    make(&mut file, size, layout).map(|base| (base, true))
    // The lock goes with the file, closed here.
}

/// "handle nonce", as `make` writes it.
fn parse(text: &str) -> Option<(pg_sys::dsm_handle, u64)> {
    let mut words = text.split_whitespace();
    Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
}

/// The segment the file names, mapped for good, if it still exists and is the one the file made.
fn existing(handle: pg_sys::dsm_handle, nonce: u64, size: usize, layout: u64) -> Option<*mut u8> {
    // SAFETY: attaching by handle maps the segment if it exists and returns null if it does not;
    // its first bytes are read only once it is known to be long enough for a header, and it is
    // detached again unless it is ours.
    unsafe {
        let segment = pg_sys::dsm_attach(handle);
        if segment.is_null() {
            return None;
        }
        let base = pg_sys::dsm_segment_address(segment).cast::<u8>();
        let header = base.cast::<Header>();
        let ours = pg_sys::dsm_segment_map_length(segment) >= size
            && (*header).magic == MAGIC
            && (*header).layout == layout
            && (*header).nonce == nonce;
        if !ours {
            pg_sys::dsm_detach(segment);
            return None;
        }
        pg_sys::dsm_pin_mapping(segment);
        Some(base)
    }
}

/// A new segment, zeroed, its handle written to `file`, kept until the server stops.
fn make(file: &mut File, size: usize, layout: u64) -> Result<*mut u8, String> {
    let mut nonce = [0u8; 8];
    // SAFETY: fills the 8 bytes given. Without a strong random source the nonce is zero, which the
    // handle still tells apart from any segment made before a restart.
    unsafe { pg_sys::pg_strong_random(nonce.as_mut_ptr().cast(), nonce.len()) };
    let nonce = u64::from_le_bytes(nonce);
    // SAFETY: a segment of `size` bytes (at least a header's), zeroed and given its header before
    // any other backend can learn its handle; destroyed by the transaction's resource owner if the
    // file cannot be written, pinned (segment and mapping) only once it is.
    unsafe {
        let segment = pg_sys::dsm_create(size, pg_sys::DSM_CREATE_NULL_IF_MAXSEGMENTS as i32);
        if segment.is_null() {
            return Err("the server's dynamic shared memory segments are all in use".into());
        }
        let base = pg_sys::dsm_segment_address(segment).cast::<u8>();
        std::ptr::write_bytes(base, 0, size);
        base.cast::<Header>().write(Header { magic: MAGIC, layout, nonce, reserved: 0 });
        let handle = pg_sys::dsm_segment_handle(segment);
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(format!("{handle} {nonce}\n").as_bytes()));
        if let Err(e) = written {
            pg_sys::dsm_detach(segment);
            return Err(format!("{FILE}: {e}"));
        }
        pg_sys::dsm_pin_segment(segment);
        pg_sys::dsm_pin_mapping(segment);
        Ok(base)
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_file_names_a_handle_and_a_nonce_or_nothing() {
        assert_eq!(parse("17 42\n"), Some((17, 42)));
        assert_eq!(parse(""), None);
        assert_eq!(parse("17"), None);
        assert_eq!(parse("x 42"), None);
        assert_eq!(parse("-1 42"), None);
    }
}

//! The jobs this session claimed, with their queue's number: what lets a completion pick the
//! statement made for the job's queue (`lease`), one that keeps the job in the history or one that
//! forgets it (guide, "Queues that keep nothing"), instead of the statement that decides by reading
//! the queue's settings for whichever job it finds.
//!
//! Only a hint. A job never moves to another queue and an id is never given again, so what is
//! kept here stays true; a job completed by another session, failed, reaped or claimed in a
//! transaction that rolled back merely leaves its entry behind. The forgetting statement checks
//! the queue it was told all the same, so that no hint could ever delete a job of a queue that
//! keeps its jobs: told wrong, it completes nothing, and the completion runs the deciding
//! statement. A job this session does not know is completed as before.

use std::cell::RefCell;
use std::collections::HashMap;

/// Enough for a worker's claims in flight; past it everything is forgotten at once, so that the
/// entries of jobs this session never finishes cannot grow without bound.
const MOST: usize = 4096;

thread_local! {
    /// A backend is one thread, of one database: job ids do not repeat.
    static HELD: RefCell<HashMap<i64, i32>> = RefCell::new(HashMap::new());
}

/// This session claimed `jobs` of the queue numbered `queue_id`.
pub fn claimed(queue_id: i32, jobs: impl Iterator<Item = i64>) {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        for job in jobs {
            if held.len() >= MOST {
                held.clear();
            }
            held.insert(job, queue_id);
        }
    });
}

/// The number of the queue of `job`, if this session claimed it; forgotten as it is told.
pub fn finishing(job: i64) -> Option<i32> {
    HELD.with(|held| held.borrow_mut().remove(&job))
}

//! The one row decoder: a row is read as a tuple of its columns in order (or as a named type
//! whose `FromRow` reads each with `Column`), each either a value (`i64`, `String`, ...) for a
//! column the statement returns from a NOT NULL column, or an `Option` for one that may be NULL.

use pgrx::datum::{Interval, JsonB, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::{self, SpiHeapTupleData};

use super::payload::Payload;
use super::status::Status;

/// A value of one column.
pub trait Column: Sized {
    /// Column `ordinal` (1-based) of `row`.
    fn column(row: &SpiHeapTupleData, ordinal: usize) -> spi::Result<Self>;
}

macro_rules! columns {
    ($($t:ty),*) => {$(
        impl Column for $t {
            /// A NULL here is a broken invariant (the table's constraints say NOT NULL), not an input.
            fn column(row: &SpiHeapTupleData, ordinal: usize) -> spi::Result<Self> {
                Ok(row.get::<$t>(ordinal)?.unwrap_or_else(|| panic!("column {ordinal} is NULL where the table says NOT NULL")))
            }
        }
        impl Column for Option<$t> {
            fn column(row: &SpiHeapTupleData, ordinal: usize) -> spi::Result<Self> {
                row.get::<$t>(ordinal)
            }
        }
    )*};
}

columns!(
    bool,
    i32,
    i64,
    f64,
    String,
    Vec<String>,
    Vec<i64>,
    Interval,
    JsonB,
    TimestampWithTimeZone,
    Payload,
    Status,
    pg_sys::Oid
);

/// A whole row, decoded column by column.
pub trait FromRow: Sized {
    fn from_row(row: &SpiHeapTupleData) -> spi::Result<Self>;
}

/// A row whose columns are not wanted, only counted.
impl FromRow for () {
    fn from_row(_: &SpiHeapTupleData) -> spi::Result<Self> {
        Ok(())
    }
}

macro_rules! rows {
    ($(($($t:ident $n:tt),+)),*) => {$(
        impl<$($t: Column),+> FromRow for ($($t,)+) {
            fn from_row(row: &SpiHeapTupleData) -> spi::Result<Self> {
                Ok(($($t::column(row, $n)?,)+))
            }
        }
    )*};
}

rows!(
    (A 1),
    (A 1, B 2),
    (A 1, B 2, C 3),
    (A 1, B 2, C 3, D 4),
    (A 1, B 2, C 3, D 4, E 5),
    (A 1, B 2, C 3, D 4, E 5, F 6),
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7),
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8),
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9),
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9, J 10),
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9, J 10, K 11),
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9, J 10, K 11, L 12),
    (A 1, B 2, C 3, D 4, E 5, F 6, G 7, H 8, I 9, J 10, K 11, L 12, M 13)
);

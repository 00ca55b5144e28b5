//! `Status`: a `jq_status` value carried as the server's own datum (the enum label's oid), so that
//! a function can return a job's status as the enum it is, not as text.

use pgrx::callconv::{BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::prelude::*;
use pgrx::{FromDatum, IntoDatum};

/// Only ever read from a `jq_status` column; enum values are passed by value, so the datum needs
/// no memory of its own.
#[derive(Clone, Copy)]
pub struct Status(pg_sys::Datum);

impl FromDatum for Status {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _: pg_sys::Oid) -> Option<Self> {
        (!is_null).then_some(Status(datum))
    }
}

impl IntoDatum for Status {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    /// Rows are decoded by `is_compatible_with`; the oid itself is never asked for, as no `Status`
    /// is ever passed to a statement.
    fn type_oid() -> pg_sys::Oid {
        pg_sys::ANYENUMOID
    }

    fn is_compatible_with(other: pg_sys::Oid) -> bool {
        // SAFETY: a catalog lookup of a type oid.
        unsafe { pg_sys::type_is_enum(other) }
    }
}

// SAFETY: returns the enum datum unchanged as the function's jq_status result.
unsafe impl BoxRet for Status {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        // SAFETY: a jq_status datum, returned as the function's jq_status result.
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}

impl_sql_translatable!(Status, "jq_status");

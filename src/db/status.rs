//! `Status`: a `jq_status` value carried as the server's own datum (the enum label's oid), so that
//! a function can return a job's status as the enum it is, not as text.

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::nullable::Nullable;
use pgrx::prelude::*;
use pgrx::{FromDatum, IntoDatum};

/// Only ever read from a `jq_status` column; enum values are passed by value, so the datum needs
/// no memory of its own.
#[derive(Clone, Copy)]
pub struct Status(pg_sys::Datum);

impl Status {
    /// Whether this is the label `name`: one lookup, by the label's oid, in the server's cache of
    /// enum labels.
    pub fn is(self, name: &str) -> bool {
        // SAFETY: a catalog cache lookup by oid; the tuple is read while held and released once.
        unsafe {
            let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::ENUMOID as _, self.0);
            if tuple.is_null() {
                error!("no enum label has the oid {}", self.0.value());
            }
            let label = &(*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_enum>(tuple)).enumlabel;
            let matches = std::ffi::CStr::from_ptr(label.data.as_ptr()).to_bytes() == name.as_bytes();
            pg_sys::ReleaseSysCache(tuple);
            matches
        }
    }
}

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

// SAFETY: a jq_status argument is the enum datum, taken unchanged (`FromDatum` above).
unsafe impl<'fcx> ArgAbi<'fcx> for Status {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        // SAFETY: the caller's promise: a non-null jq_status argument.
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        // SAFETY: the caller's promise: a jq_status argument, maybe null.
        unsafe { arg.unbox_arg_using_from_datum() }.into()
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

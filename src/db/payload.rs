//! `Payload`: a jsonb value carried as the server's own datum.
//!
//! pgrx's `JsonB` converts through text and serde_json in both directions. A queue only stores
//! payloads and hands them back, so this type passes the datum through untouched and measures its
//! size without detoasting it.

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::{Datum, UnboxDatum};
use pgrx::memcxt::PgMemoryContexts;
use pgrx::prelude::*;
use pgrx::{FromDatum, IntoDatum};

/// A handle, not an owner: copying it copies the pointer, and the value lives in whatever memory
/// context it was read into.
#[derive(Clone, Copy)]
pub struct Payload(pg_sys::Datum);

impl Payload {
    /// Bytes of the jsonb value as stored before compression, header excluded.
    pub fn size_bytes(&self) -> usize {
        // SAFETY: the datum is a jsonb value (only jsonb arguments and columns become a Payload).
        unsafe { pg_sys::toast_raw_datum_size(self.0) - pg_sys::VARHDRSZ }
    }
}

impl FromDatum for Payload {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _: pg_sys::Oid) -> Option<Self> {
        (!is_null).then_some(Payload(datum))
    }

    /// Values read through SPI live in SPI's memory, freed when SPI disconnects: copy (and detoast)
    /// the payload into the caller's context so it outlives that.
    unsafe fn from_datum_in_memory_context(
        mut memory_context: PgMemoryContexts,
        datum: pg_sys::Datum,
        is_null: bool,
        _: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: a non-null jsonb datum, copied into the memory context switched to.
        unsafe {
            memory_context.switch_to(|_| {
                let copy = pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr());
                Some(Payload(pg_sys::Datum::from(copy)))
            })
        }
    }
}

impl IntoDatum for Payload {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

// SAFETY: a Payload argument is read as the datum it is; pgrx passes only jsonb arguments here.
unsafe impl<'fcx> ArgAbi<'fcx> for Payload {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        // SAFETY: the argument is a jsonb datum, which `from_datum` takes as it is.
        unsafe { arg.unbox_arg_using_from_datum() }.expect("a non-null payload argument")
    }
}

/// Array elements (jq_enqueue_batch) arrive as datums inside the array, which outlives the call.
// SAFETY: the element datum is kept as it is, and the array it points into outlives the call.
unsafe impl UnboxDatum for Payload {
    type As<'src> = Payload;

    unsafe fn unbox<'src>(datum: Datum<'src>) -> Payload
    where
        Self: 'src,
    {
        Payload(datum.sans_lifetime())
    }
}

// SAFETY: returns the jsonb datum unchanged as the function's jsonb result.
unsafe impl BoxRet for Payload {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        // SAFETY: a jsonb datum, returned as the function's jsonb result.
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}

impl_sql_translatable!(Payload, "jsonb");

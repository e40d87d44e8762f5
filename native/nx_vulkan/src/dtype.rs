//! Nx types as they cross the NIF boundary: `{:f, 32}`, `{:s, 64}`, `{:u, 8}`...
use rustler::{Atom, Decoder, NifResult, Term};

mod atoms {
    rustler::atoms! { f, bf, s, u, c }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F16,
    BF16,
    F32,
    F64,
    S8,
    S16,
    S32,
    S64,
    U8,
    U16,
    U32,
    U64,
    C64,
    C128,
    /// Types no kernel takes (2/4-bit integers, 8-bit floats, f8_e4m3fn); ops on them take the
    /// host fallback.
    Other,
}

impl Dtype {
    pub fn bytes(self) -> u64 {
        use Dtype::*;
        match self {
            S8 | U8 => 1,
            F16 | BF16 | S16 | U16 => 2,
            F32 | S32 | U32 => 4,
            F64 | S64 | U64 | C64 => 8,
            C128 => 16,
            Other => 1,
        }
    }


    pub fn name(self) -> &'static str {
        use Dtype::*;
        match self {
            F16 => "f16",
            BF16 => "bf16",
            F32 => "f32",
            F64 => "f64",
            S8 => "s8",
            S16 => "s16",
            S32 => "s32",
            S64 => "s64",
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            C64 => "c64",
            C128 => "c128",
            Other => "sub-byte and 8-bit float types",
        }
    }
}

impl<'a> Decoder<'a> for Dtype {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let (kind, bits): (Atom, u32) = term.decode()?;
        use Dtype::*;
        let t = if kind == atoms::f() {
            match bits {
                16 => F16,
                32 => F32,
                64 => F64,
                _ => Other,
            }
        } else if kind == atoms::bf() && bits == 16 {
            BF16
        } else if kind == atoms::s() {
            match bits {
                8 => S8,
                16 => S16,
                32 => S32,
                64 => S64,
                _ => Other,
            }
        } else if kind == atoms::u() {
            match bits {
                8 => U8,
                16 => U16,
                32 => U32,
                64 => U64,
                _ => Other,
            }
        } else if kind == atoms::c() {
            match bits {
                64 => C64,
                128 => C128,
                _ => return Err(rustler::Error::BadArg),
            }
        } else {
            // f8_e4m3fn and any type a later Nx adds: no kernel takes it, so the op reports
            // "unsupported" and takes the host fallback with that reason, never a bare badarg.
            Other
        };
        Ok(t)
    }
}

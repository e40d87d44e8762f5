//! One error type for the whole crate. NIFs return `Result<T, Error>`; rustler encodes it as
//! `{:ok, t}` or `{:error, {kind, message}}`, and `Nx.Vulkan.Native.unwrap!/1` turns the error
//! into `ArgumentError` (kind `argument`), `ArithmeticError` (kind `arithmetic`: a deferred check
//! failed, see checks.rs), a host fallback (kind `unsupported`), `ArgumentError` again (kind
//! `other_device`: tensors of one op on different devices, which the Elixir side can resolve
//! first for constants and compiled programs) or `Nx.Vulkan.Error` (kinds `vulkan` and
//! `out_of_memory`).
use rustler::{Encoder, Env, Term};
use std::fmt::Display;

pub mod atoms {
    rustler::atoms! { argument, arithmetic, vulkan, unsupported, already_deallocated, out_of_memory, other_device }
}

#[derive(Debug, Clone)]
pub enum Error {
    /// The caller passed something invalid (shape, dtype, index).
    Argument(String),
    /// Integer arithmetic Nx refuses (division by zero, a negative exponent), found by a
    /// deferred check.
    Arithmetic(String),
    /// The device cannot do this yet; the Elixir side routes the op through the host fallback
    /// and records this message as the reason.
    Unsupported(String),
    /// Vulkan failed (no loader, no device, a failed submission...).
    Vulkan(String),
    /// An allocation would pass the memory budget, or the driver refused it, and reclaiming
    /// did not help (memory.rs). The Elixir side reclaims more and retries once before raising.
    OutOfMemory(String),
    /// An op's tensors are on different devices (context.rs).
    OtherDevice(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn vulkan(context: &str, err: impl Display) -> Self {
        Error::Vulkan(format!("{context}: {err}"))
    }
}

macro_rules! arg_error {
    ($($fmt:tt)*) => { $crate::error::Error::Argument(format!($($fmt)*)) };
}
macro_rules! unsupported {
    ($($fmt:tt)*) => { $crate::error::Error::Unsupported(format!($($fmt)*)) };
}
pub(crate) use {arg_error, unsupported};

impl Encoder for Error {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        match self {
            Error::Argument(m) => (atoms::argument(), m.as_str()).encode(env),
            Error::Arithmetic(m) => (atoms::arithmetic(), m.as_str()).encode(env),
            Error::Unsupported(m) => (atoms::unsupported(), m.as_str()).encode(env),
            Error::Vulkan(m) => (atoms::vulkan(), m.as_str()).encode(env),
            Error::OutOfMemory(m) => (atoms::out_of_memory(), m.as_str()).encode(env),
            Error::OtherDevice(m) => (atoms::other_device(), m.as_str()).encode(env),
        }
    }
}

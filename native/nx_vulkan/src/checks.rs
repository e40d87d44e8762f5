//! Deferred checks. An op Nx makes raise on bad values (integer division by zero, a negative
//! integer exponent or shift, a singular triangular matrix) cannot look at the values on the host
//! without a flush and a fence wait. Instead the Elixir side computes the condition on the device
//! into a scalar (e.g. `any(b == 0)`) and attaches it to the op's result as a `Check`. Every
//! dispatch's output inherits its inputs' checks (ops::record), so a tensor carries the checks of
//! everything it was computed from; the next host read of it (download) copies those scalars
//! alongside the data, in the same submission, and raises for the first failed one, in the order
//! the checks were made. Checks found clean are dropped from the tensor.
use crate::dtype::Dtype;
use crate::error::{arg_error, Error, Result};
use crate::queue::{self, Command};
use crate::tensor::{self, BufferRef, DeviceBuffer, Kind};
use rustler::Atom;
use smallvec::SmallVec;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use vulkano::buffer::Subbuffer;

mod atoms {
    rustler::atoms! { nonzero, negative, argument, arithmetic }
}

const UNKNOWN: u8 = 0;
const CLEAN: u8 = 1;
const FAILED: u8 = 2;
/// A check made while a program was captured (capture.rs): its value is the program's to
/// compute at each replay, which gives the outputs checks of their own (`instantiate`); host
/// reads never read a template.
const TEMPLATE: u8 = 3;

/// Orders checks by creation, so a read reports the earliest failure (later ones may be
/// consequences of it).
static NEXT_SEQUENCE: AtomicU64 = AtomicU64::new(0);

pub struct Check {
    /// A private copy of the condition's scalar: holding the scalar's own tensor would also
    /// hold its checks, a chain as long as a loop that makes one check per step.
    value: BufferRef,
    dtype: Dtype,
    /// Fails when the value is negative (true) or nonzero (false).
    negative: bool,
    arithmetic: bool,
    /// The exception's message; `{value}` stands for the scalar's value.
    message: String,
    sequence: u64,
    state: AtomicU8,
    /// The scalar's value once read (meaningful when FAILED).
    read: AtomicU64,
}

impl Check {
    fn error(&self) -> Error {
        let value = self.read.load(Ordering::Relaxed) as i64;
        let message = self.message.replace("{value}", &value.to_string());
        if self.arithmetic {
            Error::Arithmetic(message)
        } else {
            Error::Argument(message)
        }
    }

    /// Sets the state from the scalar's bytes (little-endian, `dtype.bytes()` of them).
    fn settle(&self, bytes: &[u8]) {
        let n = self.dtype.bytes() as usize;
        let mut word = [0u8; 8];
        word[..n].copy_from_slice(&bytes[..n]);
        let signed = matches!(self.dtype, Dtype::S8 | Dtype::S16 | Dtype::S32 | Dtype::S64);
        let raw = u64::from_le_bytes(word);
        // Sign-extend narrow signed values, so `{value}` and the negative test see the number.
        let shift = 64 - 8 * n as u32;
        let value = if signed { ((raw << shift) as i64) >> shift } else { raw as i64 };
        let failed = if self.negative { signed && value < 0 } else { raw != 0 };
        self.read.store(value as u64, Ordering::Relaxed);
        self.state.store(if failed { FAILED } else { CLEAN }, Ordering::Release);
    }
}

/// The checks a tensor depends on: its own, and those of the tensors it was computed from.
/// Sharing the inputs' sets makes inheriting O(1); the depth bound flattens long chains, so a
/// loop of dependent ops neither builds a deep structure (recursive drops) nor copies lists.
pub struct CheckSet {
    checks: Vec<Arc<Check>>,
    parents: Vec<Arc<CheckSet>>,
    depth: u32,
}

const MAX_DEPTH: u32 = 32;

impl CheckSet {
    fn new(checks: Vec<Arc<Check>>, parents: Vec<Arc<CheckSet>>) -> Option<Arc<CheckSet>> {
        let depth = parents.iter().map(|p| p.depth + 1).max().unwrap_or(0);
        let set = CheckSet { checks, parents, depth };
        if depth <= MAX_DEPTH {
            return Some(Arc::new(set));
        }
        let (unsettled, failed) = set.collect();
        let checks: Vec<Arc<Check>> = unsettled.into_iter().chain(failed).chain(set.templates()).collect();
        (!checks.is_empty()).then(|| Arc::new(CheckSet { checks, parents: Vec::new(), depth: 0 }))
    }

    /// The templates in the set, each once, in the order they were made.
    fn templates(&self) -> Vec<Arc<Check>> {
        let mut found: Vec<Arc<Check>> = Vec::new();
        let mut seen_sets: HashSet<*const CheckSet> = HashSet::new();
        let mut stack: Vec<&CheckSet> = vec![self];
        while let Some(set) = stack.pop() {
            if !seen_sets.insert(set as *const CheckSet) {
                continue;
            }
            for check in set.checks.iter().filter(|c| c.state.load(Ordering::Acquire) == TEMPLATE) {
                if !found.iter().any(|f| Arc::ptr_eq(f, check)) {
                    found.push(check.clone());
                }
            }
            stack.extend(set.parents.iter().map(|p| p.as_ref()));
        }
        found.sort_by_key(|c| c.sequence);
        found
    }

    /// Every check in the set not known to be clean: (not read yet, failed), each once.
    fn collect(&self) -> (Vec<Arc<Check>>, Vec<Arc<Check>>) {
        let (mut unsettled, mut failed) = (Vec::new(), Vec::new());
        let mut seen_sets: HashSet<*const CheckSet> = HashSet::new();
        let mut seen_checks: HashSet<*const Check> = HashSet::new();
        let mut stack: Vec<&CheckSet> = vec![self];
        while let Some(set) = stack.pop() {
            if !seen_sets.insert(set as *const CheckSet) {
                continue;
            }
            for check in &set.checks {
                if !seen_checks.insert(Arc::as_ptr(check)) {
                    continue;
                }
                match check.state.load(Ordering::Acquire) {
                    UNKNOWN => unsettled.push(check.clone()),
                    FAILED => failed.push(check.clone()),
                    _ => {}
                }
            }
            stack.extend(set.parents.iter().map(|p| p.as_ref()));
        }
        (unsettled, failed)
    }
}

/// Whether any tensor was ever given a check (`attach`): until then no tensor carries one, and
/// `inherit`, on every dispatch's path, takes no lock.
static ANY_ATTACHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Gives `out` (a dispatch's output) its inputs' checks. Called for every dispatch: a tensor
/// without checks costs one uncontended lock (none while no check was ever attached).
pub fn inherit(out: &DeviceBuffer, inputs: &[&BufferRef]) -> Result<()> {
    if !ANY_ATTACHED.load(Ordering::Acquire) {
        return Ok(());
    }
    let mut sets: SmallVec<[Arc<CheckSet>; 2]> = SmallVec::new();
    for input in inputs {
        if std::ptr::eq(&***input as *const DeviceBuffer, out) {
            continue;
        }
        if let Some(set) = lock(&input.checks)?.as_ref() {
            if !sets.iter().any(|s| Arc::ptr_eq(s, set)) {
                sets.push(set.clone());
            }
        }
    }
    if sets.is_empty() {
        return Ok(());
    }
    let mut own = lock(&out.checks)?;
    if let Some(existing) = own.take() {
        if !sets.iter().any(|s| Arc::ptr_eq(s, &existing)) {
            sets.push(existing);
        }
    }
    *own = if sets.len() == 1 { sets.pop() } else { CheckSet::new(Vec::new(), sets.into_vec()) };
    Ok(())
}

/// Whether `tensor` carries checks a host read would have to read (not read yet, or failed).
pub fn live(tensor: &DeviceBuffer) -> Result<bool> {
    Ok(lock(&tensor.checks)?.as_ref().is_some_and(|set| {
        let (unsettled, failed) = set.collect();
        !unsettled.is_empty() || !failed.is_empty()
    }))
}

/// The templates (checks made while a program was captured) `tensor` carries, in order.
pub fn templates(tensor: &DeviceBuffer) -> Result<Vec<Arc<Check>>> {
    Ok(lock(&tensor.checks)?.as_ref().map(|set| set.templates()).unwrap_or_default())
}

/// A replay's check from a template: the same condition and message over `value`, the
/// replay's own copy of the condition's scalar.
pub fn instantiate(template: &Check, value: BufferRef) -> Arc<Check> {
    derive(template, value, UNKNOWN)
}

fn derive(template: &Check, value: BufferRef, state: u8) -> Arc<Check> {
    Arc::new(Check {
        value,
        dtype: template.dtype,
        negative: template.negative,
        arithmetic: template.arithmetic,
        message: template.message.clone(),
        sequence: NEXT_SEQUENCE.fetch_add(1, Ordering::Relaxed),
        state: AtomicU8::new(state),
        read: AtomicU64::new(0),
    })
}

/// A device loop run's check from a template its condition or body made: over `value`, the
/// run's copy of the loop's first failed value (`accumulate`); a template again while a program
/// is captured (the enclosing program then makes each replay's own), else a check to read.
pub fn for_loop_run(template: &Check, value: &BufferRef) -> Result<Arc<Check>> {
    if crate::capture::capturing() {
        let check = derive(template, value.clone(), TEMPLATE);
        crate::capture::add_check(&check, value)?;
        Ok(check)
    } else {
        Ok(derive(template, value.clone(), UNKNOWN))
    }
}

/// A device loop's command folding one evaluation of a check's value into `acc` (16 bytes,
/// zero at the loop's start): where `acc` holds no failed value yet and `value` fails, `acc`
/// takes its bytes, so after the loop `acc` holds the first failure, read as the check's value.
/// With a `gate` (the loop's flag, a u32), only while the gate is not zero: a body's checks count
/// for the iterations that ran, not those a chunk runs past the condition.
pub fn accumulate(template: &Check, value: &Subbuffer<[u8]>, acc: &Subbuffer<[u8]>, gate: Option<&Subbuffer<[u8]>>) -> Result<Command> {
    let bytes = template.dtype.bytes();
    let signed = matches!(template.dtype, Dtype::S8 | Dtype::S16 | Dtype::S32 | Dtype::S64);
    // The value's low `bytes` bytes in two words; failed as `Check::settle` decides.
    let (mask_lo, mask_hi) = match bytes {
        8 => (u32::MAX, u32::MAX),
        n => ((u64::from(u32::MAX) >> (32 - 8 * n as u32)) as u32, 0),
    };
    let failed = match (template.negative, signed) {
        (true, true) if bytes == 8 => "(hi >> 31) != 0u".to_string(),
        (true, true) => format!("((lo >> {}u) & 1u) != 0u", 8 * bytes - 1),
        (true, false) => "false".to_string(),
        (false, _) => format!("(lo & {mask_lo}u) != 0u || (hi & {mask_hi}u) != 0u"),
    };
    let source = format!(
        "#version 450\nlayout(local_size_x = 1) in;\n\
         layout(set = 0, binding = 0) readonly buffer G {{ uint gate[]; }};\n\
         layout(set = 0, binding = 1) readonly buffer V {{ uint value[]; }};\n\
         layout(set = 0, binding = 2) buffer A {{ uint acc[]; }};\n\
         bool failed(uint lo, uint hi) {{ return {failed}; }}\n\
         void main() {{\n  if ({gated} && gate[0] == 0u) return;\n  if (failed(acc[0], acc[1])) return;\n  \
         uint lo = value[0];\n  uint hi = {hi};\n  if (failed(lo, hi)) {{ acc[0] = lo & {mask_lo}u; acc[1] = hi & {mask_hi}u; }}\n}}\n",
        gated = gate.is_some(),
        hi = if bytes == 8 { "value[1]" } else { "0u" },
    );
    let pipeline = crate::fuse::kernel("loop_check", &source, 0)?;
    // An ungated command binds the value as its (unread) gate.
    let bindings = SmallVec::from_vec(vec![gate.unwrap_or(value).clone(), value.clone(), acc.clone()]);
    Ok(Command::Dispatch(queue::Dispatch::new("loop_check", pipeline, bindings, [0; queue::PUSH_WORDS], [1, 1, 1], 1)))
}

/// Adds `checks` to those `out` carries.
pub fn attach(out: &DeviceBuffer, checks: Vec<Arc<Check>>) -> Result<()> {
    let mut own = lock(&out.checks)?;
    let parents: Vec<Arc<CheckSet>> = own.take().into_iter().collect();
    *own = CheckSet::new(checks, parents);
    ANY_ATTACHED.store(true, Ordering::Release);
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>> {
    m.lock().map_err(|_| Error::Vulkan("a check lock was poisoned".into()))
}

/// Attaches a check to `out`, a tensor just made by the op the check guards: the op raises at
/// the next host read of `out` or of anything computed from it when `value` (an integer scalar
/// computed on the device) is nonzero (`condition` :nonzero) or negative (:negative). The
/// exception is ArithmeticError (`exception` :arithmetic) or ArgumentError (:argument), with
/// `message`, where `{value}` stands for the value.
#[rustler::nif]
fn attach_check(
    env: rustler::Env,
    out: BufferRef,
    value: BufferRef,
    dtype: Dtype,
    condition: Atom,
    exception: Atom,
    message: String,
) -> Result<Atom> {
    let _device = crate::context::use_device_of(&[&out, &value])?;
    let _capture = crate::capture::scope(env);
    let bytes = dtype.bytes();
    if !matches!(
        dtype,
        Dtype::S8 | Dtype::S16 | Dtype::S32 | Dtype::S64 | Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64
    ) || value.bytes < bytes
    {
        return Err(arg_error!("a check's value must be an integer scalar, got {} of {} bytes", dtype.name(), value.bytes));
    }
    let negative = if condition == atoms::negative() {
        true
    } else if condition == atoms::nonzero() {
        false
    } else {
        return Err(arg_error!("a check's condition is :nonzero or :negative"));
    };
    let arithmetic = if exception == atoms::arithmetic() {
        true
    } else if exception == atoms::argument() {
        false
    } else {
        return Err(arg_error!("a check's exception is :arithmetic or :argument"));
    };
    // While a program is captured the copy is one of its commands and the check a template:
    // each replay's outputs get checks of their own (capture.rs).
    let captured = crate::capture::capturing();
    let copy = tensor::alloc(bytes)?;
    crate::capture::record(Command::Copy { src: value.get()?, dst: copy.get()?, bytes }, &[&value, &copy])?;
    let check = Arc::new(Check {
        value: copy.clone(),
        dtype,
        negative,
        arithmetic,
        message,
        sequence: NEXT_SEQUENCE.fetch_add(1, Ordering::Relaxed),
        state: AtomicU8::new(if captured { TEMPLATE } else { UNKNOWN }),
        read: AtomicU64::new(0),
    });
    if captured {
        crate::capture::add_check(&check, &copy)?;
    }
    attach(&out, vec![check])?;
    Ok(rustler::types::atom::ok())
}

/// The reads a host read of `tensor` must make of its checks' values: record them before the
/// flush (so they ride in the same submission), then `finish` after it.
pub struct PendingReads {
    reads: Vec<(Arc<Check>, tensor::Pooled)>,
    failed: Vec<Arc<Check>>,
}

pub fn record_reads(tensor: &DeviceBuffer) -> Result<PendingReads> {
    let (unsettled, failed) = match lock(&tensor.checks)?.as_ref() {
        Some(set) => set.collect(),
        None => return Ok(PendingReads { reads: Vec::new(), failed: Vec::new() }),
    };
    let mut reads = Vec::with_capacity(unsettled.len());
    for check in unsettled {
        let stage = tensor::raw_buffer(Kind::Download, 8)?;
        let bytes = check.dtype.bytes();
        queue::record(Command::Copy { src: check.value.get()?, dst: stage.clone(), bytes })?;
        reads.push((check, stage));
    }
    Ok(PendingReads { reads, failed })
}

impl PendingReads {
    pub fn reads_values(&self) -> bool {
        !self.reads.is_empty()
    }

    /// After the flush: settles the checks read, and fails with the earliest failed check; when
    /// every check is clean, the tensor forgets them.
    pub fn finish(self, tensor: &DeviceBuffer) -> Result<()> {
        let PendingReads { reads, mut failed } = self;
        for (check, stage) in reads {
            {
                let guard = stage.read().map_err(|e| Error::vulkan("mapping a check's value", e))?;
                check.settle(&guard[..8]);
            }
            tensor::give_back(tensor.device, Kind::Download, stage);
            if check.state.load(Ordering::Acquire) == FAILED {
                failed.push(check);
            }
        }
        if let Some(first) = failed.iter().min_by_key(|c| c.sequence) {
            return Err(first.error());
        }
        *lock(&tensor.checks)? = None;
        Ok(())
    }
}

/// Reads `tensor`'s checks now (a flush and a fence wait): the immediate check mode, where an
/// op raises at once rather than at the next read.
#[rustler::nif(schedule = "DirtyIo")]
fn verify_checks(env: rustler::Env, tensor: BufferRef) -> Result<Atom> {
    let _device = crate::context::use_device_of(&[&tensor])?;
    let _capture = crate::capture::scope(env);
    crate::capture::refuse("an immediate check")?;
    let pending = record_reads(&tensor)?;
    queue::flush(queue::FlushReason::ValueRead)?;
    pending.finish(&tensor)?;
    Ok(rustler::types::atom::ok())
}

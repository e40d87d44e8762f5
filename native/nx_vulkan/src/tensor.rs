//! Device buffers: the `DeviceBuffer` resource behind every `Nx.Vulkan.Backend` tensor, and the
//! upload and download NIFs. A buffer is plain bytes; shape and dtype live on the Elixir side, so
//! reshape, squeeze and bitcast never touch the device.
use crate::checks::{self, CheckSet};
use crate::context::{ctx, current, MAX_DEVICES};
use crate::error::{arg_error, Error, Result};
use crate::queue::{self, Command, FlushReason};
use rustler::{Binary, Env, NewBinary};
use once_cell::sync::Lazy;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use crate::memory;
use vulkano::buffer::{AllocateBufferError, Buffer, BufferCreateInfo, BufferUsage, Subbuffer};
use vulkano::Validated;
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter};
use vulkano::buffer::BufferMemory;
use vulkano::device::DeviceOwned;
use vulkano::memory::MemoryPropertyFlags;

pub struct DeviceBuffer {
    /// None once deallocated (`Nx.backend_deallocate/1`): the memory went back to the pool.
    buffer: Mutex<Option<Subbuffer<[u8]>>>,
    /// Bytes the tensor uses (the allocation may be rounded up).
    pub bytes: u64,
    /// Shared buffers (cached constants) ignore deallocation: others still use them.
    pinned: AtomicBool,
    /// The deferred checks this tensor depends on (checks.rs); None for nearly every tensor.
    pub checks: Mutex<Option<Arc<CheckSet>>>,
    /// Captures and compiled programs using the buffer (capture.rs): deallocation waits for none.
    pub held: AtomicUsize,
    /// The device index the buffer lives on (context.rs).
    pub device: usize,
    /// What `fill` wrote (element bytes, count, bits), for a tensor it made: such a constant can
    /// be made again on another device (ops/layout.rs refill).
    pub filled: std::sync::OnceLock<(u64, u64, u64)>,
    /// When its buffer was allocated (`pool_clock_ms`; the pool's age limit).
    born: u64,
    /// For a lazy view (a transpose or broadcast, ops/layout.rs `lazy_view`), which has no buffer
    /// of its own until an op needs one: what it reads, or its copy once made.
    view: Mutex<Option<View>>,
    /// Whether this is a lazy view (copied or not): ops check it before taking the view's lock.
    pub is_view: bool,
    /// Lazy views of this buffer not yet copied: deallocation leaves the memory to them.
    views: AtomicUsize,
}

/// A tensor read from a base buffer through `strides` (elements of the base; a transpose or
/// broadcast, offset 0). Kernels that take strides read the base directly (binary ops, dot); the
/// first op that needs a buffer of its own makes the contiguous copy through `copy`, and the
/// view then keeps the copy and lets the base go.
pub struct View {
    pub elem_bytes: u64,
    pub dims: Vec<u64>,
    pub strides: Vec<i64>,
    copy: fn(&BufferRef, &View) -> Result<BufferRef>,
    state: ViewState,
}

enum ViewState {
    Lazy(BaseRef),
    Copied(BufferRef),
}

/// A lazy view's hold on its base, counted in the base's `views` while it lasts (the base's
/// deallocation leaves its memory alone meanwhile).
struct BaseRef(BufferRef);

impl Drop for BaseRef {
    fn drop(&mut self) {
        self.0.views.fetch_sub(1, Ordering::AcqRel);
    }
}

impl DeviceBuffer {
    /// The buffer, or an ArgumentError if the tensor was deallocated.
    pub fn get(&self) -> Result<Subbuffer<[u8]>> {
        let own = self.buffer.lock().map_err(|_| Error::Vulkan("a buffer lock was poisoned".into()))?.clone();
        match own {
            Some(buffer) => Ok(buffer),
            None => self.view_copy()?.get(),
        }
    }

    /// A lazy view's contiguous copy, made now (queued like any op) if no op needed it before.
    fn view_copy(&self) -> Result<BufferRef> {
        let mut view = self.view.lock().map_err(|_| Error::Vulkan("a view lock was poisoned".into()))?;
        let view = view
            .as_mut()
            .ok_or_else(|| arg_error!("this tensor was deallocated (Nx.backend_deallocate/1) and cannot be used"))?;
        let copied = match &view.state {
            ViewState::Copied(copied) => return Ok(copied.clone()),
            ViewState::Lazy(BaseRef(base)) => (view.copy)(base, view)?,
        };
        view.state = ViewState::Copied(copied.clone());
        Ok(copied)
    }

    /// For a lazy view not copied yet: its base, dims and strides (in elements of the base).
    pub fn lazy_parts(&self) -> Option<(BufferRef, Vec<u64>, Vec<i64>)> {
        if !self.is_view {
            return None;
        }
        let view = self.view.lock().ok()?;
        let view = view.as_ref()?;
        match &view.state {
            ViewState::Copied(_) => None,
            ViewState::Lazy(BaseRef(base)) => Some((base.clone(), view.dims.clone(), view.strides.clone())),
        }
    }

    /// Gives the memory back to the pool now (commands already queued keep their own reference,
    /// so pending work is unaffected). False if already deallocated.
    fn release(&self) -> bool {
        if self.view.lock().ok().and_then(|mut v| v.take()).is_some() {
            return true;
        }
        let taken = self.buffer.lock().ok().and_then(|mut b| b.take());
        self.return_to_pool(taken)
    }

    /// Returns a tensor's buffer (taken out of it) to the pool; false if there was none.
    fn return_to_pool(&self, taken: Option<Subbuffer<[u8]>>) -> bool {
        match taken {
            Some(buffer) => {
                LIVE_BYTES[self.device].fetch_sub(buffer.size(), Ordering::Relaxed);
                LIVE_BUFFERS[self.device].fetch_sub(1, Ordering::Relaxed);
                give_back(self.device, Kind::Tensor, Pooled { buffer, born: self.born });
                true
            }
            None => false,
        }
    }
}

// rustler runs every NIF under catch_unwind. A panic cannot leave a DeviceBuffer half-updated (its
// only mutation, deallocation, is one take under a lock), so it is safe to cross that boundary.
impl std::panic::RefUnwindSafe for DeviceBuffer {}
impl std::panic::UnwindSafe for DeviceBuffer {}

/// A counted reference to a `DeviceBuffer` living in a BEAM resource object of our own type
/// (`BUFFER_TYPE`, opened when the library loads): what every tensor's `ref` is. It does what
/// rustler's ResourceArc does, but finds its resource type in a static rather than by hashing
/// the Rust TypeId (SipHash) into a map on every decode and every new tensor: three lookups per
/// binary op, ~6% of that NIF's time in perf.
pub struct BufferRef {
    /// The resource object; the DeviceBuffer sits at its start (the BEAM aligns resource data
    /// to 8 bytes, all DeviceBuffer needs: checked below).
    raw: std::ptr::NonNull<DeviceBuffer>,
}

const _: () = assert!(std::mem::align_of::<DeviceBuffer>() <= 8);

/// The resource type of tensor buffers, opened by `open_buffer_type` at load.
static BUFFER_TYPE: std::sync::atomic::AtomicPtr<rustler::sys::ErlNifResourceType> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

// SAFETY: the DeviceBuffer is Send + Sync; the BEAM's reference counting is thread-safe.
unsafe impl Send for BufferRef {}
unsafe impl Sync for BufferRef {}

impl BufferRef {
    /// Moves `buffer` into a new resource object (one reference: this handle's).
    pub fn new(buffer: DeviceBuffer) -> BufferRef {
        let resource_type = BUFFER_TYPE.load(Ordering::Relaxed);
        assert!(!resource_type.is_null(), "the tensor resource type is opened at load");
        // SAFETY: a resource type of ours; the allocation is large enough and 8-byte aligned.
        unsafe {
            let raw = rustler::sys::enif_alloc_resource(resource_type, std::mem::size_of::<DeviceBuffer>()) as *mut DeviceBuffer;
            let raw = std::ptr::NonNull::new(raw).expect("enif_alloc_resource returned null");
            raw.as_ptr().write(buffer);
            BufferRef { raw }
        }
    }
}

impl std::ops::Deref for BufferRef {
    type Target = DeviceBuffer;
    fn deref(&self) -> &DeviceBuffer {
        // SAFETY: the handle holds a reference, so the object is alive and initialised.
        unsafe { self.raw.as_ref() }
    }
}

impl Clone for BufferRef {
    fn clone(&self) -> BufferRef {
        // SAFETY: a live resource object.
        unsafe { rustler::sys::enif_keep_resource(self.raw.as_ptr() as *const _) };
        BufferRef { raw: self.raw }
    }
}

impl Drop for BufferRef {
    fn drop(&mut self) {
        // SAFETY: this handle's reference, given back once.
        unsafe { rustler::sys::enif_release_resource(self.raw.as_ptr() as *const _) };
    }
}

impl rustler::Encoder for BufferRef {
    fn encode<'a>(&self, env: Env<'a>) -> rustler::Term<'a> {
        // SAFETY: a live resource object; the term keeps its own reference.
        unsafe { rustler::Term::new(env, rustler::sys::enif_make_resource(env.as_c_arg(), self.raw.as_ptr() as *const _)) }
    }
}

/// The tensor buffer `term` refers to, without a reference of our own.
fn resource_of(term: rustler::Term) -> rustler::NifResult<std::ptr::NonNull<DeviceBuffer>> {
    let mut raw = std::ptr::null();
    // SAFETY: the type is ours (a resource of another type, or any other term, fails the get).
    unsafe {
        let resource_type = BUFFER_TYPE.load(Ordering::Relaxed);
        if resource_type.is_null()
            || rustler::sys::enif_get_resource(term.get_env().as_c_arg(), term.as_c_arg(), resource_type, &mut raw) == 0
        {
            return Err(rustler::Error::BadArg);
        }
        Ok(std::ptr::NonNull::new_unchecked(raw as *mut DeviceBuffer))
    }
}

impl<'a> rustler::Decoder<'a> for BufferRef {
    fn decode(term: rustler::Term<'a>) -> rustler::NifResult<BufferRef> {
        let raw = resource_of(term)?;
        // SAFETY: the term keeps the object alive until we take our own reference.
        unsafe { rustler::sys::enif_keep_resource(raw.as_ptr() as *const _) };
        Ok(BufferRef { raw })
    }
}

/// A tensor argument of an op NIF, borrowed from its term for the call: the term keeps the
/// object alive until the NIF returns, so decoding one takes no reference and dropping it gives
/// none back (a keep and a release per operand saved on every op). It derefs to a `BufferRef`
/// whose clone takes a reference of its own, as anything that keeps the tensor must.
pub struct BufferArg<'a> {
    handle: std::mem::ManuallyDrop<BufferRef>,
    _term: std::marker::PhantomData<rustler::Term<'a>>,
}

impl std::ops::Deref for BufferArg<'_> {
    type Target = BufferRef;
    fn deref(&self) -> &BufferRef {
        &self.handle
    }
}

impl<'a> rustler::Decoder<'a> for BufferArg<'a> {
    fn decode(term: rustler::Term<'a>) -> rustler::NifResult<BufferArg<'a>> {
        let raw = resource_of(term)?;
        Ok(BufferArg { handle: std::mem::ManuallyDrop::new(BufferRef { raw }), _term: std::marker::PhantomData })
    }
}

/// The resource's destructor: the BEAM calls it once no term or handle refers to the object.
unsafe extern "C" fn drop_buffer(_env: *mut rustler::sys::ErlNifEnv, object: *mut std::ffi::c_void) {
    // A panic must not unwind into the BEAM; the buffer is then leaked, nothing worse.
    let _ = std::panic::catch_unwind(|| unsafe { std::ptr::drop_in_place(object as *mut DeviceBuffer) });
}

/// Opens the tensor resource type; called from the library's load callback (lib.rs).
pub fn open_buffer_type(env: Env) -> bool {
    let init = rustler::sys::ErlNifResourceTypeInit {
        dtor: drop_buffer as *const rustler::sys::ErlNifResourceDtor,
        stop: std::ptr::null(),
        down: std::ptr::null(),
        members: 1,
        dyncall: std::ptr::null(),
    };
    let mut tried = rustler::sys::ErlNifResourceFlags::ERL_NIF_RT_CREATE;
    // SAFETY: called in the load callback with its env; the name is NUL-terminated.
    let resource_type = unsafe {
        rustler::sys::enif_init_resource_type(
            env.as_c_arg(),
            c"nx_vulkan_device_buffer".as_ptr(),
            &init,
            rustler::sys::ErlNifResourceFlags::ERL_NIF_RT_CREATE,
            &mut tried,
        )
    };
    BUFFER_TYPE.store(resource_type as *mut _, Ordering::Relaxed);
    !resource_type.is_null()
}

/// Per device: bytes and buffers of live tensors, and the most bytes at once.
static LIVE_BYTES: [AtomicU64; MAX_DEVICES] = [const { AtomicU64::new(0) }; MAX_DEVICES];
static LIVE_BUFFERS: [AtomicU64; MAX_DEVICES] = [const { AtomicU64::new(0) }; MAX_DEVICES];
static PEAK_BYTES: [AtomicU64; MAX_DEVICES] = [const { AtomicU64::new(0) }; MAX_DEVICES];

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // The buffer goes back to the pool; pending or in-flight commands may still hold clones
        // of it (the recorder orders its next tenant's commands after theirs: see `take`). No
        // lock: nothing else holds the tensor now.
        let taken = self.buffer.get_mut().ok().and_then(Option::take);
        self.return_to_pool(taken);
    }
}

/// Frees a tensor's device memory now, unless it is shared (a cached constant), a compiled
/// program uses it (it is freed with the program then) or a lazy view reads it (freed when the
/// last of them is copied or dropped).
#[rustler::nif]
fn deallocate(tensor: BufferRef) -> rustler::Atom {
    let shared = tensor.pinned.load(Ordering::Relaxed)
        || tensor.held.load(Ordering::Acquire) > 0
        || tensor.views.load(Ordering::Acquire) > 0;
    if shared || tensor.release() {
        rustler::types::atom::ok()
    } else {
        crate::error::atoms::already_deallocated()
    }
}

/// Marks a buffer as shared, so deallocation leaves it alone.
#[rustler::nif]
fn pin(tensor: BufferRef) -> rustler::Atom {
    tensor.pinned.store(true, Ordering::Relaxed);
    rustler::types::atom::ok()
}

/// Buffer pool. Creating a VkBuffer and binding memory costs microseconds per op (and large
/// ones far more), so freed buffers are kept by kind and power-of-two size class and reused
/// (tensor buffers at once, staging buffers once their Arc count of one says no pending or
/// in-flight command uses them: see `take`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Tensor,
    Upload,
    Download,
}

/// How much freed memory the pool keeps: an eighth of the largest device-local heap, between
/// 1 GiB and 16 GiB (1 GiB on lavapipe's 2 GiB heap; 16 GiB on the H200's 141 GB). With a fixed
/// 1 GiB, a few large intermediates filled it and every later 256 MB result was a fresh
/// allocation.
pub fn pool_max_bytes() -> u64 {
    static CAP: Lazy<u64> = Lazy::new(|| {
        let heap = ctx()
            .map(|c| c.info.heaps.iter().filter(|h| h.1).map(|h| h.0).max().unwrap_or(0))
            .unwrap_or(0);
        (heap / 8).clamp(1 << 30, 16 << 30)
    });
    *CAP
}
const POOL_MAX_BUFFER: u64 = 256 << 20;

/// A buffer of the pool (in it or in use), with when it was allocated: the age limit reads that
/// here rather than in a table by handle (on an eager op's path the buffer object's first read
/// is a cache miss: the GPU thread had it last).
pub(crate) struct Pooled {
    pub buffer: Subbuffer<[u8]>,
    born: u64,
}

impl std::ops::Deref for Pooled {
    type Target = Subbuffer<[u8]>;
    fn deref(&self) -> &Subbuffer<[u8]> {
        &self.buffer
    }
}

/// Free buffers by kind and size class (a slot per power of two from MIN_CLASS to
/// POOL_MAX_BUFFER: an index, not a hash, on every op's path), each with when it came back
/// (`pool_clock_ms`).
struct Pool {
    free: [[Vec<(Pooled, u64)>; CLASSES]; KINDS],
    bytes: u64,
}

const KINDS: usize = 3;
const MIN_CLASS: u64 = 256;
const CLASSES: usize = (POOL_MAX_BUFFER.trailing_zeros() - MIN_CLASS.trailing_zeros() + 1) as usize;

impl Default for Pool {
    fn default() -> Self {
        Pool { free: std::array::from_fn(|_| std::array::from_fn(|_| Vec::new())), bytes: 0 }
    }
}

impl Pool {
    /// The free list of `kind` and `class` (a poolable size: a power of two up to POOL_MAX_BUFFER).
    fn slot(&mut self, kind: Kind, class: u64) -> &mut Vec<(Pooled, u64)> {
        &mut self.free[kind as usize][(class.trailing_zeros() - MIN_CLASS.trailing_zeros()) as usize]
    }

    /// Every slot with the size class its buffers have.
    fn slots(&mut self) -> impl Iterator<Item = (u64, &mut Vec<(Pooled, u64)>)> {
        self.free
            .iter_mut()
            .flat_map(|slots| slots.iter_mut().enumerate().map(|(i, list)| (MIN_CLASS << i, list)))
    }
}

/// Whether buffers of `size` bytes go back to the pool when released.
fn poolable(size: u64) -> bool {
    (MIN_CLASS..=POOL_MAX_BUFFER).contains(&size) && size.is_power_of_two()
}

/// How long a buffer may sit unused in the pool, in ms (0: forever; NXV_POOL_IDLE_MS): a
/// background thread frees older ones once a second, so memory a burst of work pooled returns
/// to the device once the program moves on or goes idle.
pub static POOL_IDLE_MS: AtomicU64 = AtomicU64::new(0);

/// How old (since its allocation) a buffer may be and still go back to the pool, in ms (0: any
/// age; NXV_POOL_MAX_AGE_MS): older ones are freed when released, and the trimming thread frees
/// pooled ones as they pass it, so the pool renews what long-running work keeps cycling.
pub static POOL_MAX_AGE_MS: AtomicU64 = AtomicU64::new(0);

/// Whether a buffer allocated at `born` is past the age limit at `now` (`pool_clock_ms`).
fn past_age(born: u64, now: u64) -> bool {
    let max_age = POOL_MAX_AGE_MS.load(Ordering::Relaxed);
    max_age != 0 && now.saturating_sub(born) > max_age
}

/// The pool's clock in milliseconds: CLOCK_MONOTONIC_COARSE on Linux (a few ms of resolution,
/// read from the vDSO's data page without the timestamp counter), which its age and idle limits
/// need no more than. Every release reads it: the precise clock was ~5% of an eager op's caller
/// time in perf (lavapipe host), with both limits on by default.
#[cfg(target_os = "linux")]
fn pool_clock_ms() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut now) };
    now.tv_sec as u64 * 1000 + now.tv_nsec as u64 / 1_000_000
}

#[cfg(not(target_os = "linux"))]
fn pool_clock_ms() -> u64 {
    static START: Lazy<std::time::Instant> = Lazy::new(std::time::Instant::now);
    START.elapsed().as_millis() as u64
}

/// Starts the trimming thread on first use of the pool.
static TRIMMER: Lazy<()> = Lazy::new(|| {
    let _ = std::thread::Builder::new().name("nxv-pool-trim".into()).spawn(|| loop {
        std::thread::sleep(std::time::Duration::from_millis(TRIM_PERIOD_MS));
        let _inside = crate::exit_guard::enter();
        trim_idle();
    });
});
const TRIM_PERIOD_MS: u64 = 1000;

/// Frees the pooled buffers that have waited longer than POOL_IDLE_MS, on every device.
fn trim_idle() {
    for pool in POOLS.iter() {
        trim_idle_in(pool);
    }
}

fn trim_idle_in(pool: &Mutex<Pool>) {
    let idle = POOL_IDLE_MS.load(Ordering::Relaxed);
    if idle == 0 && POOL_MAX_AGE_MS.load(Ordering::Relaxed) == 0 {
        return;
    }
    // Taken out under the lock, freed after it: freeing device memory can take a while, and
    // every allocation waits on this lock.
    let mut expired = Vec::new();
    if let Ok(mut pool) = pool.lock() {
        let now = pool_clock_ms();
        let mut freed = 0;
        for (class, list) in pool.slots() {
            let (old, kept): (Vec<_>, Vec<_>) = std::mem::take(list).into_iter().partition(|(pooled, since)| {
                (idle != 0 && now.saturating_sub(*since) > idle) || past_age(pooled.born, now)
            });
            freed += old.len() as u64 * class;
            *list = kept;
            expired.extend(old);
        }
        pool.bytes -= freed;
    }
    drop(expired);
}

/// One pool per device.
static POOLS: Lazy<Vec<Mutex<Pool>>> = Lazy::new(|| (0..MAX_DEVICES).map(|_| Mutex::new(Pool::default())).collect());
static POOL_HITS: [AtomicU64; MAX_DEVICES] = [const { AtomicU64::new(0) }; MAX_DEVICES];
static POOL_MISSES: [AtomicU64; MAX_DEVICES] = [const { AtomicU64::new(0) }; MAX_DEVICES];

fn size_class(bytes: u64) -> u64 {
    bytes.max(MIN_CLASS).next_power_of_two()
}

fn take(kind: Kind, class: u64) -> Option<Pooled> {
    if !poolable(class) {
        return None;
    }
    let mut pool = POOLS[current()].lock().ok()?;
    let list = pool.slot(kind, class);
    // A tensor buffer is only touched by commands, so it can be handed out while queued or
    // in-flight commands still use it: the recorder orders the new tensor's commands after
    // them (a barrier where a command touches a buffer the open batch already used, and one at
    // the start of every command buffer for earlier submissions). Without that, a loop that
    // drops each result recorded a fresh 256 MB allocation per op (~0.5 ms on the H200).
    // Staging buffers are written and read by the host, so they wait until nothing holds them.
    let i = match kind {
        Kind::Tensor => list.len().checked_sub(1)?,
        Kind::Upload | Kind::Download => list.iter().position(|(p, _)| Arc::strong_count(p.buffer.buffer()) == 1)?,
    };
    let (buffer, _) = list.swap_remove(i);
    pool.bytes -= class;
    Some(buffer)
}

/// Returns a buffer of device `device` to its pool.
pub(crate) fn give_back(device: usize, kind: Kind, buffer: Pooled) {
    let class = buffer.size();
    if !poolable(class) {
        return;
    }
    let cap = pool_max_bytes();
    Lazy::force(&TRIMMER);
    let now = pool_clock_ms();
    if past_age(buffer.born, now) {
        return;
    }
    if let Ok(mut pool) = POOLS[device].lock() {
        // Full: make room by dropping the oldest buffers of the class holding the most bytes
        // (memory in-flight commands still use is freed when they finish).
        while pool.bytes + class > cap {
            let Some((largest, list)) = pool
                .slots()
                .filter(|(_, list)| !list.is_empty())
                .max_by_key(|(class, list)| *class * list.len() as u64)
            else {
                return;
            };
            list.remove(0);
            pool.bytes -= largest;
        }
        pool.bytes += class;
        pool.slot(kind, class).push((buffer, now));
    }
}

/// The current device's pool: (hits, misses, bytes pooled).
pub fn pool_stats() -> (u64, u64, u64) {
    let d = current();
    let pooled = POOLS[d].lock().map(|p| p.bytes).unwrap_or(0);
    (POOL_HITS[d].load(Ordering::Relaxed), POOL_MISSES[d].load(Ordering::Relaxed), pooled)
}

/// The current device's live tensors: (bytes, buffers, peak bytes).
pub fn memory_stats() -> (u64, u64, u64) {
    let d = current();
    (
        LIVE_BYTES[d].load(Ordering::Relaxed),
        LIVE_BUFFERS[d].load(Ordering::Relaxed),
        PEAK_BYTES[d].load(Ordering::Relaxed),
    )
}

pub fn reset_peak() {
    let d = current();
    PEAK_BYTES[d].store(LIVE_BYTES[d].load(Ordering::Relaxed), Ordering::Relaxed);
}

pub(crate) fn raw_buffer(kind: Kind, bytes: u64) -> Result<Pooled> {
    let c = ctx()?;
    // Pooled sizes are powers of two (never zero-sized, 8-byte kernels stay aligned); buffers
    // too large to pool are rounded to 16 bytes.
    let size = if size_class(bytes) <= POOL_MAX_BUFFER.min(c.info.max_storage_buffer_range) {
        size_class(bytes)
    } else {
        bytes.div_ceil(16) * 16
    };
    if let Some(buffer) = take(kind, size) {
        POOL_HITS[current()].fetch_add(1, Ordering::Relaxed);
        return Ok(buffer);
    }
    POOL_MISSES[current()].fetch_add(1, Ordering::Relaxed);
    Ok(Pooled { buffer: new_buffer(kind, bytes, size)?, born: pool_clock_ms() })
}

/// A new device buffer of `size` bytes (`bytes` asked for) for `kind`, past the budget only
/// after reclaiming.
fn new_buffer(kind: Kind, bytes: u64, size: u64) -> Result<Subbuffer<[u8]>> {
    let c = ctx()?;
    let (usage, filter) = match kind {
        Kind::Tensor => (
            BufferUsage::STORAGE_BUFFER | BufferUsage::TRANSFER_SRC | BufferUsage::TRANSFER_DST,
            if size <= DIRECT_READ_UNCACHED {
                SMALL_TENSORS
            } else {
                MemoryTypeFilter::PREFER_DEVICE
            },
        ),
        Kind::Upload => (
            BufferUsage::TRANSFER_SRC,
            MemoryTypeFilter::PREFER_HOST | MemoryTypeFilter::HOST_SEQUENTIAL_WRITE,
        ),
        Kind::Download => (
            BufferUsage::TRANSFER_DST,
            MemoryTypeFilter::PREFER_HOST | MemoryTypeFilter::HOST_RANDOM_ACCESS,
        ),
    };
    if bytes > c.info.max_storage_buffer_range {
        return Err(arg_error!(
            "a tensor of {bytes} bytes (a result, or an intermediate such as an operand widened to the result type) exceeds this device's maxStorageBufferRange ({} bytes)",
            c.info.max_storage_buffer_range
        ));
    }
    let allocate = || {
        Buffer::new_slice::<u8>(
            c.memory.clone(),
            BufferCreateInfo {
                usage,
                ..Default::default()
            },
            AllocationCreateInfo {
                memory_type_filter: filter,
                ..Default::default()
            },
            size,
        )
    };
    let out_of_memory = |e: &Validated<AllocateBufferError>| {
        matches!(e, Validated::Error(AllocateBufferError::AllocateMemory(e)) if memory::is_out_of_memory(e))
    };
    let failed = |e| Error::vulkan(&format!("allocating {size} bytes"), e);
    match allocate() {
        Ok(buffer) => return Ok(buffer),
        Err(e) if !out_of_memory(&e) => return Err(failed(e)),
        Err(_) => {}
    }
    // Over the budget (or refused by the driver): free the pool's idle buffers and try again;
    // then, where waiting is allowed (not on a normal scheduler: the Elixir side reclaims there
    // and retries the op), wait for queued and in-flight work, whose buffers then return too.
    for wait in [false, true] {
        if wait {
            if on_normal_scheduler() {
                break;
            }
            queue::flush(FlushReason::Reclaim)?;
        }
        trim_pool();
        match allocate() {
            Ok(buffer) => return Ok(buffer),
            Err(e) if !out_of_memory(&e) => return Err(failed(e)),
            Err(_) => {}
        }
    }
    Err(memory::out_of_memory(size))
}

fn on_normal_scheduler() -> bool {
    unsafe { rustler::sys::enif_thread_type() == rustler::sys::ERL_NIF_THR_NORMAL_SCHEDULER }
}

/// Frees every idle buffer in the current device's pool (those in-flight commands still use go
/// when they finish).
pub fn trim_pool() {
    let freed = POOLS[current()].lock().map(|mut pool| {
        pool.bytes = 0;
        std::mem::take(&mut *pool)
    });
    drop(freed);
}

/// Waits for queued and in-flight work and empties the pool, on every device opened: what the
/// Elixir side does (with a garbage collection of the calling process) before it retries an op
/// that ran out of memory.
#[rustler::nif(schedule = "DirtyIo")]
fn reclaim() -> Result<rustler::Atom> {
    for device in crate::context::opened() {
        let _device = crate::context::use_device(device)?;
        queue::flush(FlushReason::Reclaim)?;
        trim_pool();
    }
    Ok(rustler::types::atom::ok())
}

/// A new device-local tensor buffer of `bytes` bytes (contents undefined until written).
pub fn alloc(bytes: u64) -> Result<BufferRef> {
    let Pooled { buffer, born } = raw_buffer(Kind::Tensor, bytes)?;
    let size = buffer.size();
    let device = current();
    let live = LIVE_BYTES[device].fetch_add(size, Ordering::Relaxed) + size;
    // A locked update only when the peak moves (rarely, in a steady state).
    if live > PEAK_BYTES[device].load(Ordering::Relaxed) {
        PEAK_BYTES[device].fetch_max(live, Ordering::Relaxed);
    }
    LIVE_BUFFERS[device].fetch_add(1, Ordering::Relaxed);
    let out = BufferRef::new(DeviceBuffer {
        buffer: Mutex::new(Some(buffer)),
        bytes,
        pinned: AtomicBool::new(false),
        checks: Mutex::new(None),
        held: AtomicUsize::new(0),
        device,
        filled: std::sync::OnceLock::new(),
        born,
        view: Mutex::new(None),
        is_view: false,
        views: AtomicUsize::new(0),
    });
    crate::capture::allocated(&out)?;
    Ok(out)
}

/// A lazy view of `base` (see `View`): no memory, no command until an op needs a copy, which
/// `copy` makes. It carries the base's deferred checks.
pub fn lazy_view(
    base: &BufferRef,
    elem_bytes: u64,
    dims: Vec<u64>,
    strides: Vec<i64>,
    copy: fn(&BufferRef, &View) -> Result<BufferRef>,
) -> Result<BufferRef> {
    let bytes = dims.iter().product::<u64>() * elem_bytes;
    base.views.fetch_add(1, Ordering::AcqRel);
    let view = View { elem_bytes, dims, strides, copy, state: ViewState::Lazy(BaseRef(base.clone())) };
    let out = BufferRef::new(DeviceBuffer {
        buffer: Mutex::new(None),
        bytes,
        pinned: AtomicBool::new(false),
        checks: Mutex::new(None),
        held: AtomicUsize::new(0),
        device: base.device,
        filled: std::sync::OnceLock::new(),
        born: pool_clock_ms(),
        view: Mutex::new(Some(view)),
        is_view: true,
        views: AtomicUsize::new(0),
    });
    crate::checks::inherit(&out, &[base])?;
    Ok(out)
}


/// Uploads a binary into a new tensor buffer on `device`. The bytes go to a host-visible staging
/// buffer now; the copy into the tensor is queued like any op, so an upload never forces a flush.
#[rustler::nif(schedule = "DirtyCpu")]
fn upload(env: Env, data: Binary, device: usize) -> Result<BufferRef> {
    let _device = crate::context::use_device(device)?;
    let _capture = crate::capture::scope(env);
    let bytes = data.len() as u64;
    let out = alloc(bytes)?;
    if bytes > 0 {
        let stage = raw_buffer(Kind::Upload, bytes)?;
        {
            let mut guard = stage
                .write()
                .map_err(|e| Error::vulkan("mapping an upload buffer", e))?;
            guard[..data.len()].copy_from_slice(data.as_slice());
        }
        let copy = Command::Copy { src: stage.clone(), dst: out.get()?, bytes };
        crate::capture::record(copy, &[&out])?;
        give_back(device, Kind::Upload, stage);
        // Uploads run on a dirty scheduler, so they wait here at the queue's bound.
        queue::throttle()?;
    }
    Ok(out)
}

/// Small results (a loss, a loop's condition) go to device memory the host can map where the
/// device has such (a GPU's BAR): the GPU writes it at its usual speed, and a read takes the
/// bytes after the fence, without a copy and a second submission.
const SMALL_TENSORS: MemoryTypeFilter = MemoryTypeFilter {
    required_flags: MemoryPropertyFlags::DEVICE_LOCAL,
    preferred_flags: MemoryPropertyFlags::HOST_VISIBLE,
    not_preferred_flags: MemoryPropertyFlags::empty(),
};

/// Small tensors a read may take straight from their mapped memory (see `host_readable`): at most
/// this many bytes of device memory the host reads uncached (a GPU's BAR, each load a bus round
/// trip), which is also the size up to which tensors are allocated there.
const DIRECT_READ_UNCACHED: u64 = 256;

/// The largest read taken straight from memory of these property flags after the flush instead
/// of through a staging copy: None for any size (memory the host maps and caches: a CPU
/// device's), DIRECT_READ_UNCACHED for mapped memory the host reads uncached (a GPU's BAR, each
/// load a bus round trip), 0 for memory the host cannot map.
fn in_place_limit(flags: MemoryPropertyFlags) -> Option<u64> {
    if !flags.contains(MemoryPropertyFlags::HOST_VISIBLE) {
        Some(0)
    } else if flags.contains(MemoryPropertyFlags::HOST_CACHED) {
        None
    } else {
        Some(DIRECT_READ_UNCACHED)
    }
}

/// Whether a read of `bytes` bytes of `buffer` may copy them straight from its (mapped) memory.
fn host_readable(buffer: &Subbuffer<[u8]>, bytes: u64) -> bool {
    let BufferMemory::Normal(memory) = buffer.buffer().memory() else { return false };
    let device_memory = memory.device_memory();
    let types = &device_memory.device().physical_device().memory_properties().memory_types;
    let Some(memory_type) = types.get(device_memory.memory_type_index() as usize) else { return false };
    in_place_limit(memory_type.property_flags).is_none_or(|limit| bytes <= limit) && buffer.mapped_slice().is_ok()
}

/// The largest read `host_readable` takes in place on the current device, from the memory types
/// tensors are allocated in (small ones in SMALL_TENSORS' type, the rest in PREFER_DEVICE's):
/// `Nx.Vulkan.Device.info/0`'s `direct_read_bytes`.
pub fn direct_read_limit() -> Result<Option<u64>> {
    use vulkano::memory::allocator::MemoryAllocator;
    let c = ctx()?;
    let limit_of = |filter: MemoryTypeFilter| {
        let flags = c
            .memory
            .find_memory_type_index(u32::MAX, filter)
            .map(|i| c.device.physical_device().memory_properties().memory_types[i as usize].property_flags)
            .unwrap_or(MemoryPropertyFlags::empty());
        in_place_limit(flags)
    };
    Ok(match limit_of(MemoryTypeFilter::PREFER_DEVICE) {
        None => None,
        large => large.max(limit_of(SMALL_TENSORS).map(|small| small.min(DIRECT_READ_UNCACHED))),
    })
}

/// Downloads `bytes` bytes (at most the tensor's size) of a tensor: flushes the queue (at most one
/// submission and its fence wait, counted as a host sync for `reason`) and copies the bytes out
/// of the tensor's own memory where the host can read it (`host_readable`: a CPU device's memory,
/// or a small result in a GPU's host-visible device memory), else out of a staging buffer a copy
/// queued before the flush fills. Reads of the tensor's deferred checks (checks.rs) go with the
/// flush; a failed check is the result instead.
#[rustler::nif(schedule = "DirtyIo")]
fn download<'a>(env: Env<'a>, tensor: BufferRef, bytes: u64, reason: rustler::Atom) -> Result<Binary<'a>> {
    let _device = crate::context::use_device_of(&[&tensor])?;
    let _capture = crate::capture::scope(env);
    crate::capture::host_read(&tensor)?;
    let reason = read_reason(reason)?;
    let bytes = bytes.min(tensor.bytes);
    let mut out = NewBinary::new(env, bytes as usize);
    let checks = checks::record_reads(&tensor)?;
    let buffer = tensor.get()?;
    let direct = bytes > 0 && host_readable(&buffer, bytes);
    let stage = if bytes > 0 && !direct {
        let stage = raw_buffer(Kind::Download, bytes)?;
        queue::record(Command::Copy {
            src: buffer.clone(),
            dst: stage.clone(),
            bytes,
        })?;
        Some(stage)
    } else {
        None
    };
    // Nothing to copy or wait for (an empty tensor without checks to read): no flush.
    if bytes > 0 || checks.reads_values() {
        queue::flush(reason)?;
    }
    checks.finish(&tensor)?;
    if direct {
        // After the flush: every command writing the buffer has completed, and each submission
        // ends with a barrier that makes its writes visible to the host.
        let guard = buffer.read().map_err(|e| Error::vulkan("mapping a tensor for a read", e))?;
        out.as_mut_slice().copy_from_slice(&guard[..bytes as usize]);
    }
    if let Some(stage) = stage {
        let guard = stage
            .read()
            .map_err(|e| Error::vulkan("mapping a download buffer", e))?;
        out.as_mut_slice().copy_from_slice(&guard[..bytes as usize]);
        drop(guard);
        give_back(tensor.device, Kind::Download, stage);
    }
    Ok(out.into())
}

mod atoms {
    rustler::atoms! { download, fallback, defn_control }
}

/// Who reads: the user (`download`), the host fallback, or `Nx.Defn.Evaluator`'s control flow.
fn read_reason(reason: rustler::Atom) -> Result<FlushReason> {
    if reason == atoms::download() {
        Ok(FlushReason::Download)
    } else if reason == atoms::fallback() {
        Ok(FlushReason::Fallback)
    } else if reason == atoms::defn_control() {
        Ok(FlushReason::DefnControl)
    } else {
        Err(arg_error!("a download's reason is :download, :fallback or :defn_control"))
    }
}

/// Makes a lazy view's copy now (queued like any op); nothing for other tensors.
#[rustler::nif]
fn materialize(env: Env, tensor: BufferRef) -> Result<rustler::Atom> {
    let _device = crate::context::use_device_of(&[&tensor])?;
    let _capture = crate::capture::scope(env);
    tensor.get()?;
    Ok(rustler::types::atom::ok())
}

#[rustler::nif]
fn byte_size(tensor: BufferRef) -> u64 {
    tensor.bytes
}

/// The device index a tensor lives on.
#[rustler::nif]
fn buffer_device(tensor: BufferRef) -> usize {
    tensor.device
}

/// Where a tensor lives and whether `fill` made it: `{device, filled}`.
#[rustler::nif]
fn buffer_placement(tensor: BufferRef) -> (usize, bool) {
    (tensor.device, tensor.filled.get().is_some())
}

//! Device buffers: the `DeviceBuffer` resource behind every `Nx.Vulkan.Backend` tensor, and the
//! upload and download NIFs. A buffer is plain bytes; shape and dtype live on the Elixir side, so
//! reshape, squeeze and bitcast never touch the device.
use crate::context::ctx;
use crate::error::{arg_error, Error, Result};
use crate::queue::{self, Command, FlushReason};
use rustler::{Binary, Env, NewBinary, ResourceArc};
use std::sync::atomic::{AtomicU64, Ordering};
use vulkano::buffer::{Buffer, BufferCreateInfo, BufferUsage, Subbuffer};
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter};

pub struct DeviceBuffer {
    pub buffer: Subbuffer<[u8]>,
    /// Bytes the tensor uses (the allocation may be rounded up).
    pub bytes: u64,
}

#[rustler::resource_impl]
impl rustler::Resource for DeviceBuffer {}

// rustler runs every NIF under catch_unwind. A panic cannot leave a DeviceBuffer half-updated (it
// is never mutated after creation), so it is safe to cross that boundary.
impl std::panic::RefUnwindSafe for DeviceBuffer {}
impl std::panic::UnwindSafe for DeviceBuffer {}

pub type BufferRef = ResourceArc<DeviceBuffer>;

static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE_BUFFERS: AtomicU64 = AtomicU64::new(0);
static PEAK_BYTES: AtomicU64 = AtomicU64::new(0);

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // The Vulkan memory itself is freed when the last Subbuffer clone goes, which may be later:
        // a pending or in-flight command buffer holds clones of every buffer it uses.
        LIVE_BYTES.fetch_sub(self.buffer.size(), Ordering::Relaxed);
        LIVE_BUFFERS.fetch_sub(1, Ordering::Relaxed);
    }
}

pub fn memory_stats() -> (u64, u64, u64) {
    (
        LIVE_BYTES.load(Ordering::Relaxed),
        LIVE_BUFFERS.load(Ordering::Relaxed),
        PEAK_BYTES.load(Ordering::Relaxed),
    )
}

fn raw_buffer(bytes: u64, usage: BufferUsage, filter: MemoryTypeFilter) -> Result<Subbuffer<[u8]>> {
    let c = ctx()?;
    // Round up to 16 bytes: never a zero-sized buffer, and 8-byte element kernels stay aligned.
    let size = bytes.max(16).div_ceil(16) * 16;
    if bytes > c.info.max_storage_buffer_range {
        return Err(arg_error!(
            "a tensor of {bytes} bytes exceeds this device's maxStorageBufferRange ({} bytes)",
            c.info.max_storage_buffer_range
        ));
    }
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
    .map_err(|e| Error::vulkan(&format!("allocating {size} bytes"), e))
}

/// A new device-local tensor buffer of `bytes` bytes (contents undefined until written).
pub fn alloc(bytes: u64) -> Result<BufferRef> {
    let buffer = raw_buffer(
        bytes,
        BufferUsage::STORAGE_BUFFER | BufferUsage::TRANSFER_SRC | BufferUsage::TRANSFER_DST,
        MemoryTypeFilter::PREFER_DEVICE,
    )?;
    let size = buffer.size();
    let live = LIVE_BYTES.fetch_add(size, Ordering::Relaxed) + size;
    PEAK_BYTES.fetch_max(live, Ordering::Relaxed);
    LIVE_BUFFERS.fetch_add(1, Ordering::Relaxed);
    Ok(ResourceArc::new(DeviceBuffer { buffer, bytes }))
}

fn staging(bytes: u64, filter: MemoryTypeFilter) -> Result<Subbuffer<[u8]>> {
    raw_buffer(
        bytes,
        BufferUsage::TRANSFER_SRC | BufferUsage::TRANSFER_DST,
        filter,
    )
}

/// Uploads a binary into a new tensor buffer. The bytes go to a host-visible staging buffer now;
/// the copy into the tensor is queued like any op, so an upload never forces a flush.
#[rustler::nif(schedule = "DirtyCpu")]
fn upload(data: Binary) -> Result<BufferRef> {
    let bytes = data.len() as u64;
    let out = alloc(bytes)?;
    if bytes > 0 {
        let stage = staging(
            bytes,
            MemoryTypeFilter::PREFER_HOST | MemoryTypeFilter::HOST_SEQUENTIAL_WRITE,
        )?;
        {
            let mut guard = stage
                .write()
                .map_err(|e| Error::vulkan("mapping an upload buffer", e))?;
            guard[..data.len()].copy_from_slice(data.as_slice());
        }
        queue::record(Command::Copy {
            src: stage,
            dst: out.buffer.clone(),
            bytes,
        })?;
    }
    Ok(out)
}

/// Downloads `bytes` bytes (at most the tensor's size) of a tensor: queues a copy into a staging
/// buffer, flushes the queue (one submission, one fence wait) and reads the staging buffer.
#[rustler::nif(schedule = "DirtyIo")]
fn download<'a>(env: Env<'a>, tensor: BufferRef, bytes: u64) -> Result<Binary<'a>> {
    let bytes = bytes.min(tensor.bytes);
    let mut out = NewBinary::new(env, bytes as usize);
    if bytes > 0 {
        let stage = staging(
            bytes,
            MemoryTypeFilter::PREFER_HOST | MemoryTypeFilter::HOST_RANDOM_ACCESS,
        )?;
        queue::record(Command::Copy {
            src: tensor.buffer.clone(),
            dst: stage.clone(),
            bytes,
        })?;
        queue::flush(FlushReason::Download)?;
        let guard = stage
            .read()
            .map_err(|e| Error::vulkan("mapping a download buffer", e))?;
        out.as_mut_slice().copy_from_slice(&guard[..bytes as usize]);
    }
    Ok(out.into())
}

#[rustler::nif]
fn byte_size(tensor: BufferRef) -> u64 {
    tensor.bytes
}

//! Device memory: what is allocated, and the budget (`memory_limit`) allocations must stay under.
//!
//! Every buffer is allocated through `BudgetAllocator`, a vulkano `MemoryAllocator` that counts the
//! bytes of its allocations and frees (vulkano calls `deallocate` when the last reference to a
//! buffer goes, including the references queued and in-flight commands hold) and refuses one that
//! would pass the limit. lavapipe never refuses an allocation itself, so the budget is also what
//! makes out-of-memory behave the same, and testable, everywhere. A refusal (the budget's or the
//! driver's) is one error, handled in tensor.rs: reclaim, retry, then "out of device memory".
use crate::context::{current, MAX_DEVICES};
use crate::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vulkano::device::{Device, DeviceOwned};
use vulkano::memory::allocator::{
    AllocationCreateInfo, AllocationType, DeviceLayout, MemoryAlloc, MemoryAllocator, MemoryAllocatorError,
    MemoryTypeFilter, StandardMemoryAllocator,
};
use vulkano::memory::{DedicatedAllocation, ExternalMemoryHandleTypes, MemoryRequirements};
use vulkano::{Validated, VulkanError};

/// Bytes allocated now on each device (tensors, the pool, staging buffers, and buffers only
/// queued or in-flight commands still hold), and the most at once since start or the last
/// `reset_peak`.
static ALLOCATED: [AtomicU64; MAX_DEVICES] = [const { AtomicU64::new(0) }; MAX_DEVICES];
static PEAK: [AtomicU64; MAX_DEVICES] = [const { AtomicU64::new(0) }; MAX_DEVICES];
/// Each device's budget in bytes; 0 until the Elixir side sets it at start
/// (`Nx.Vulkan.Device.configure!/0`).
static LIMIT: AtomicU64 = AtomicU64::new(0);

/// Bytes allocated now on the current device.
pub fn allocated() -> u64 {
    ALLOCATED[current()].load(Ordering::Relaxed)
}

pub fn peak() -> u64 {
    PEAK[current()].load(Ordering::Relaxed)
}

pub fn limit() -> u64 {
    match LIMIT.load(Ordering::Relaxed) {
        0 => u64::MAX,
        n => n,
    }
}

pub fn set_limit(bytes: u64) {
    LIMIT.store(bytes, Ordering::Relaxed);
}

pub fn reset_peak() {
    PEAK[current()].store(allocated(), Ordering::Relaxed);
}

/// Whether an allocation error means "no memory" (ours or the driver's), as opposed to a bug.
pub fn is_out_of_memory(e: &MemoryAllocatorError) -> bool {
    matches!(
        e,
        MemoryAllocatorError::AllocateDeviceMemory(Validated::Error(
            VulkanError::OutOfDeviceMemory | VulkanError::OutOfHostMemory
        ))
    )
}

/// The error an allocation of `requested` bytes raises once reclaiming did not help.
pub fn out_of_memory(requested: u64) -> Error {
    let (live, _, _) = crate::tensor::memory_stats();
    let (_, _, pooled) = crate::tensor::pool_stats();
    let pending = allocated().saturating_sub(live + pooled);
    let limit = match limit() {
        u64::MAX => "none".to_string(),
        n => n.to_string(),
    };
    Error::OutOfMemory(format!(
        "out of device memory: requested {requested} bytes; live {live}, pooled {pooled}, pending {pending}, limit {limit}"
    ))
}

pub struct BudgetAllocator {
    inner: StandardMemoryAllocator,
    /// The device index whose counters this allocator keeps (freeing runs on any thread).
    index: usize,
}

impl BudgetAllocator {
    pub fn new(device: Arc<Device>, index: usize) -> Self {
        BudgetAllocator {
            inner: StandardMemoryAllocator::new_default(device),
            index,
        }
    }

    /// Counts `bytes` as allocated unless that passes the limit.
    fn reserve(&self, bytes: u64) -> Result<(), MemoryAllocatorError> {
        let before = ALLOCATED[self.index].fetch_add(bytes, Ordering::AcqRel);
        if before + bytes > limit() {
            ALLOCATED[self.index].fetch_sub(bytes, Ordering::AcqRel);
            return Err(MemoryAllocatorError::AllocateDeviceMemory(Validated::Error(
                VulkanError::OutOfDeviceMemory,
            )));
        }
        PEAK[self.index].fetch_max(before + bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Counts the reservation of an allocation that failed, or of one freed, as gone.
    fn release(&self, bytes: u64) {
        ALLOCATED[self.index].fetch_sub(bytes, Ordering::AcqRel);
    }

    fn counted(
        &self,
        bytes: u64,
        allocate: impl FnOnce() -> Result<MemoryAlloc, MemoryAllocatorError>,
    ) -> Result<MemoryAlloc, MemoryAllocatorError> {
        self.reserve(bytes)?;
        allocate().inspect_err(|_| self.release(bytes))
    }
}

fn size_of(allocation: &MemoryAlloc) -> u64 {
    allocation
        .suballocation
        .as_ref()
        .map_or(allocation.device_memory.allocation_size(), |s| s.size)
}

unsafe impl DeviceOwned for BudgetAllocator {
    fn device(&self) -> &Arc<Device> {
        self.inner.device()
    }
}

// Every method delegates to vulkano's standard allocator; only the counting is ours. The count is
// of the size each allocation reports, so a freed allocation subtracts exactly what it added.
unsafe impl MemoryAllocator for BudgetAllocator {
    fn find_memory_type_index(&self, memory_type_bits: u32, filter: MemoryTypeFilter) -> Option<u32> {
        self.inner.find_memory_type_index(memory_type_bits, filter)
    }

    fn allocate_from_type(
        &self,
        memory_type_index: u32,
        layout: DeviceLayout,
        allocation_type: AllocationType,
        never_allocate: bool,
    ) -> Result<MemoryAlloc, MemoryAllocatorError> {
        self.counted(layout.size(), || {
            self.inner
                .allocate_from_type(memory_type_index, layout, allocation_type, never_allocate)
        })
        .map(|a| self.settle(layout.size(), a))
    }

    fn allocate(
        &self,
        requirements: MemoryRequirements,
        allocation_type: AllocationType,
        create_info: AllocationCreateInfo,
        dedicated_allocation: Option<DedicatedAllocation<'_>>,
    ) -> Result<MemoryAlloc, MemoryAllocatorError> {
        let bytes = requirements.layout.size();
        self.counted(bytes, || {
            self.inner
                .allocate(requirements, allocation_type, create_info, dedicated_allocation)
        })
        .map(|a| self.settle(bytes, a))
    }

    fn allocate_dedicated(
        &self,
        memory_type_index: u32,
        allocation_size: u64,
        dedicated_allocation: Option<DedicatedAllocation<'_>>,
        export_handle_types: ExternalMemoryHandleTypes,
    ) -> Result<MemoryAlloc, MemoryAllocatorError> {
        self.counted(allocation_size, || {
            self.inner.allocate_dedicated(
                memory_type_index,
                allocation_size,
                dedicated_allocation,
                export_handle_types,
            )
        })
        .map(|a| self.settle(allocation_size, a))
    }

    unsafe fn deallocate(&self, allocation: MemoryAlloc) {
        self.release(size_of(&allocation));
        unsafe { self.inner.deallocate(allocation) }
    }
}

impl BudgetAllocator {
    /// The reservation was of the requested size; the allocation may be larger (alignment,
    /// a dedicated block): count what `deallocate` will subtract.
    fn settle(&self, reserved: u64, allocation: MemoryAlloc) -> MemoryAlloc {
        let actual = size_of(&allocation);
        if actual > reserved {
            ALLOCATED[self.index].fetch_add(actual - reserved, Ordering::AcqRel);
        } else {
            ALLOCATED[self.index].fetch_sub(reserved - actual, Ordering::AcqRel);
        }
        allocation
    }
}

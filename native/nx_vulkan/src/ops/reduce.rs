//! Reductions (sum, product, reduce_max, reduce_min) over any set of axes. keep_axes is a reshape
//! on the Elixir side: the output is contiguous over the kept axes either way.
use super::*;
use crate::dtype::Dtype;
use crate::shaders::{self, Family};
use crate::tensor::alloc;
use rustler::{Atom, Env};

const REDUCE_OPS: &[&str] = &["sum", "product", "reduce_max", "reduce_min"];
/// Reductions up to this many elements per output fold serially on GPUs too.
const SERIAL_REDUCTION_MAX: u64 = 64;

#[rustler::nif]
fn reduce(env: Env, op: Atom, dtype: Dtype, x: BufferRef, shape: Vec<u64>, axes: Vec<usize>) -> Result<BufferRef> {
    let (code, name) = super::elementwise::op_code(env, op, REDUCE_OPS)?;
    let n_red_all: u64 = axes.iter().map(|&a| shape.get(a).copied().unwrap_or(1)).product();
    // Short reductions fold serially, one invocation per output; long ones use a workgroup per
    // output and a tree in shared memory. CPU devices prefer serial (no barriers) up to the point
    // where lavapipe's loop limiter would cut the loop short (see LAVAPIPE_LOOP_BUDGET).
    let serial = if cpu_device() {
        n_red_all * (shape.len() as u64 + 2) <= LAVAPIPE_LOOP_BUDGET
    } else {
        n_red_all <= SERIAL_REDUCTION_MAX
    };
    if cpu_device() && !serial && n_red_all.div_ceil(WORKGROUP) * (shape.len() as u64 + 2) > LAVAPIPE_LOOP_BUDGET {
        return Err(unsupported!(
            "{name} of {n_red_all} elements per output exceeds what one pass can loop over on a CPU device"
        ));
    }
    let family = if serial { Family::ReduceSerial } else { Family::Reduce };
    let kernel = shaders::numeric(family, dtype, precise_f32())
        .ok_or_else(|| unsupported!("{name} on {} has no device kernel yet", dtype.name()))?;
    if let Some(&bad) = axes.iter().find(|&&a| a >= shape.len()) {
        return Err(arg_error!("axis {bad} is out of range for shape {shape:?}"));
    }
    let strides = contiguous_strides(&shape);
    check_extent(&x, dtype.bytes(), 0, &shape, &strides)?;
    let (mut kept_dims, mut kept_strides, mut red_dims, mut red_strides) = (vec![], vec![], vec![], vec![]);
    for d in 0..shape.len() {
        if axes.contains(&d) {
            red_dims.push(shape[d]);
            red_strides.push(strides[d]);
        } else {
            kept_dims.push(shape[d]);
            kept_strides.push(strides[d]);
        }
    }
    let n_out = element_count(&kept_dims);
    let n_red = element_count(&red_dims);
    let (kept_dims, kept_strides) = collapse(&kept_dims, &[kept_strides])?;
    let (red_dims, red_strides) = collapse(&red_dims, &[red_strides])?;
    let out = alloc(n_out * dtype.bytes())?;
    let mut push = Push::new();
    push.set(0, n_out)?;
    push.set(1, n_red)?;
    push.set(2, kept_dims.len() as u64)?;
    push.set(3, red_dims.len() as u64)?;
    push.set(4, 0)?;
    push.set_dims(5, &kept_dims)?;
    push.set_strides(11, &kept_strides[0])?;
    push.set_dims(17, &red_dims)?;
    push.set_strides(23, &red_strides[0])?;
    let groups = if serial { elementwise_groups(n_out) } else { grid(n_out) };
    dispatch(kernel, code, &[&x, &out], push, groups)?;
    Ok(out)
}

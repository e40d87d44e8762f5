defmodule Nx.Vulkan.Native do
  @moduledoc false
  # NIF stubs only (the Rust crate in native/nx_vulkan). Every NIF returns {:ok, value} or
  # {:error, {kind, message}}; unwrap!/1 is the one place errors become exceptions.
  @on_load :load_nif

  def load_nif do
    path = :filename.join(:code.priv_dir(:nx_vulkan), ~c"native/libnx_vulkan")

    case :erlang.load_nif(path, 0) do
      :ok ->
        :ok

      {:error, {reason, text}} ->
        IO.warn("nx_vulkan: could not load its NIF (#{reason}): #{text}; run mix compile")
        {:error, reason}
    end
  end

  @doc false
  def unwrap!({:ok, value}), do: value
  def unwrap!({:error, {:argument, message}}), do: raise(ArgumentError, message)
  def unwrap!({:error, {:arithmetic, message}}), do: raise(ArithmeticError, message)
  def unwrap!({:error, {:vulkan, message}}), do: raise(Nx.Vulkan.Error, message)

  def unwrap!({:error, {:unsupported, message}}),
    do: raise(Nx.Vulkan.Error, "not supported on the device: " <> message)

  defp nif_error, do: :erlang.nif_error(:nx_vulkan_not_loaded)

  # tensor.rs
  def upload(_binary), do: nif_error()
  def download(_buffer, _bytes, _reason), do: nif_error()
  def byte_size(_buffer), do: nif_error()
  def deallocate(_buffer), do: nif_error()
  def pin(_buffer), do: nif_error()

  # checks.rs
  def attach_check(_out, _value, _type, _condition, _exception, _message), do: nif_error()
  def verify_checks(_buffer), do: nif_error()

  # device.rs
  def device_info, do: nif_error()
  def flush, do: nif_error()
  def flush_for_fallback, do: nif_error()
  def set_batch_max(_n), do: nif_error()

  def configure(
        _precise_f32,
        _precise_dot,
        _fence_spin_us,
        _cpu_device,
        _early_submit,
        _per_invocation,
        _gemm_block,
        _gemm_coop
      ),
      do: nif_error()

  def stats, do: nif_error()
  def set_gpu_timing(_on), do: nif_error()
  def take_kernel_times, do: nif_error()

  # ops/elementwise.rs
  def unary_op(_op, _type, _x, _n), do: nif_error()
  def fft(_inverse, _rows, _n, _x, _eps), do: nif_error()
  def binary_op(_op, _type, _a, _a_shape, _b, _b_shape, _out_shape), do: nif_error()
  def classify(_op, _type, _x, _n), do: nif_error()
  def complex_unary(_op, _type, _x, _n), do: nif_error()
  def complex_real(_op, _type, _x, _n), do: nif_error()
  def select(_bytes, _pred, _pred_shape, _t, _t_shape, _f, _f_shape, _out_shape), do: nif_error()

  # ops/layout.rs
  def view_copy(_bytes, _src, _offset, _dims, _strides), do: nif_error()

  def copy_into(_bytes, _dst, _dst_off, _dst_strides, _src, _src_off, _src_strides, _dims),
    do: nif_error()

  def dynamic_slice(_bytes, _src, _offset, _dims, _strides, _starts, _max_starts, _start_strides),
    do: nif_error()

  def dynamic_put_slice(
        _bytes,
        _dst,
        _offset,
        _dst_strides,
        _src,
        _dims,
        _starts,
        _max_starts,
        _start_strides
      ),
      do: nif_error()

  def fill(_bytes, _n, _bits), do: nif_error()
  def iota(_type, _n, _inner, _dim, _eye?), do: nif_error()
  def alloc_buffer(_bytes), do: nif_error()

  def scatter(_add, _type, _target, _shape, _indices, _indices_shape, _updates, _axes),
    do: nif_error()

  def gather(_bytes, _x, _shape, _indices, _indices_shape, _axes), do: nif_error()

  # ops/convert.rs, ops/reduce.rs, ops/matmul.rs
  def as_type(_from, _to, _x, _n), do: nif_error()
  def reduce(_op, _type, _x, _shape, _axes), do: nif_error()

  def window_reduce(_op, _type, _x, _shape, _out_shape, _window, _strides, _pad_low, _dilations),
    do: nif_error()

  def sort(_type, _x, _shape, _axis, _desc, _indices, _index_bytes), do: nif_error()

  def window_scatter(
        _min,
        _type,
        _x,
        _shape,
        _source,
        _source_shape,
        _init,
        _window,
        _strides,
        _pad_low
      ),
      do: nif_error()

  def arg_reduce(_op, _type, _x, _shape, _axes, _tie_high, _index_bytes), do: nif_error()

  def triangular_solve(_type, _a, _b, _n, _cols, _batches, _backward, _a_strides, _b_strides),
    do: nif_error()

  def dot(_type, _a, _a_shape, _a_contract, _a_batch, _b, _b_shape, _b_contract, _b_batch),
    do: nif_error()
end

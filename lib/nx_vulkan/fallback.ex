defmodule Nx.Vulkan.Fallback do
  @moduledoc """
  The one path by which an op leaves the device, and its census.

  When `Nx.Vulkan.Backend` cannot run an op on the device (no kernel yet, an unsupported dtype, a
  shape beyond the kernels' limits), it calls `run/3`: flush the pending queue, download the
  inputs, compute with `Nx.BinaryBackend`, upload the result back to the device (so the next op
  is not silently computed on the host too) and count `{op, reason}`.

  Strict mode, from `config :nx_vulkan, host_fallback: :allow | :warn | :raise` or the
  `NXV_HOST_FALLBACK` environment variable (which wins): `:allow` counts silently, `:warn` logs a
  warning per fallback, `:raise` raises `Nx.Vulkan.Error` naming the op and the reason.
  """
  require Logger
  alias Nx.Tensor, as: T

  @table :nx_vulkan_fallback_census
  @modes [:allow, :warn, :raise]
  @mode_names Map.new(@modes, &{Atom.to_string(&1), &1})

  @doc "Fallbacks since start (or the last `reset/0`), as `%{op => count}`."
  @spec count() :: %{atom => non_neg_integer}
  def count do
    Map.new(:ets.tab2list(@table), fn {op, n, _reason} -> {op, n} end)
  end

  @doc "The last reason recorded for each op that fell back, as `%{op => reason}`."
  @spec reasons() :: %{atom => String.t()}
  def reasons do
    Map.new(:ets.tab2list(@table), fn {op, _n, reason} -> {op, reason} end)
  end

  @doc "Clears the census."
  def reset do
    :ets.delete_all_objects(@table)
    :ok
  end

  @doc "The strict mode in force: `NXV_HOST_FALLBACK` if set, else the `:host_fallback` config."
  @spec mode() :: :allow | :warn | :raise
  def mode do
    case System.get_env("NXV_HOST_FALLBACK") do
      value when value in [nil, ""] -> validate_mode!(Application.get_env(:nx_vulkan, :host_fallback, :allow), "config :nx_vulkan, :host_fallback")
      value -> validate_mode!(Map.get(@mode_names, value, value), "NXV_HOST_FALLBACK")
    end
  end

  defp validate_mode!(mode, _source) when mode in @modes, do: mode

  defp validate_mode!(mode, source) do
    raise ArgumentError, "#{source} must be one of allow, warn, raise; got: #{inspect(mode)}"
  end

  @doc false
  def create_table do
    :ets.new(@table, [:named_table, :public, :set, write_concurrency: true])
  end

  @doc false
  # Runs `Nx.BinaryBackend.op(args...)` on host copies of `args` and returns the result on the device.
  def run(op, reason, args) do
    case mode() do
      :raise ->
        raise Nx.Vulkan.Error,
              "#{op} would fall back to the host (#{reason}); host_fallback is :raise"

      :warn ->
        Logger.warning("nx_vulkan: #{op} falls back to the host: #{reason}")

      :allow ->
        :ok
    end

    :ets.update_counter(@table, op, {2, 1}, {op, 0, reason})
    :ets.update_element(@table, op, {3, reason})
    Nx.Vulkan.Native.flush_for_fallback() |> Nx.Vulkan.Native.unwrap!()

    # Functions passed along (reduce, window_reduce) build tensors with the default backend: make
    # that the BinaryBackend while the host computes.
    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      apply(Nx.BinaryBackend, op, Enum.map(args, &to_host/1))
    end)
    |> to_device()
  end

  defp to_host(%T{data: %Nx.Vulkan.Backend{}} = t),
    do: %{t | data: %Nx.BinaryBackend{state: Nx.Vulkan.Backend.to_binary(t)}}

  defp to_host(list) when is_list(list), do: Enum.map(list, &to_host/1)
  defp to_host(other), do: other

  defp to_device(%T{data: %Nx.BinaryBackend{state: binary}} = t),
    do: Nx.Vulkan.Backend.from_binary(t, binary, [])

  defp to_device(%T{} = t), do: t
  defp to_device(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> Enum.map(&to_device/1) |> List.to_tuple()
  defp to_device(list) when is_list(list), do: Enum.map(list, &to_device/1)
  defp to_device(other), do: other
end

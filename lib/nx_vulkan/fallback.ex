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
  @process_mode :nx_vulkan_host_fallback
  @process_tag :nx_vulkan_fallback_tag

  @doc "Fallbacks since start (or the last `reset/0`), as `%{op => count}`."
  @spec count() :: %{atom => non_neg_integer}
  def count do
    for {op, n, _reason} <- :ets.tab2list(@table), is_atom(op), into: %{}, do: {op, n}
  end

  @doc "The last reason recorded for each op that fell back, as `%{op => reason}`."
  @spec reasons() :: %{atom => String.t()}
  def reasons do
    for {op, _n, reason} <- :ets.tab2list(@table), is_atom(op), into: %{}, do: {op, reason}
  end

  @doc "Clears the census."
  def reset do
    # Per-process tags stay: they belong to whoever set them.
    :ets.select_delete(@table, [{{:"$1", :_, :_}, [{:is_atom, :"$1"}], [true]}])
    :ok
  end

  @doc """
  The strict mode in force: the calling process's own mode (`put_process_mode/1`) if set, else
  `NXV_HOST_FALLBACK` if set, else the `:host_fallback` config.
  """
  @spec mode() :: :allow | :warn | :raise
  def mode do
    case Process.get(@process_mode) do
      nil -> global_mode()
      mode -> mode
    end
  end

  @doc """
  Sets the strict mode for the calling process only (`nil` clears it), e.g. to make one test or
  one request strict. Returns the previous process mode.
  """
  def put_process_mode(nil), do: Process.delete(@process_mode)
  def put_process_mode(mode), do: Process.put(@process_mode, validate_mode!(mode, "process mode"))

  @doc """
  Tags the calling process: its fallbacks are also counted under `tag`, read with `tagged/1`.
  Lets a test attribute fallbacks to itself while other tests run concurrently.
  """
  def tag_process(tag), do: Process.put(@process_tag, tag)

  @doc "Fallbacks counted under `tag` (see `tag_process/1`)."
  def tagged(tag) do
    case :ets.lookup(@table, {:tag, tag}) do
      [{_, n, _}] -> n
      [] -> 0
    end
  end

  @doc "Every tag's fallback count, as `%{tag => count}` (see `tag_process/1`)."
  def tag_counts do
    for {{:tag, tag}, n, _} <- :ets.tab2list(@table), into: %{}, do: {tag, n}
  end

  @doc "The last `\"op: reason\"` counted under each tag, as `%{tag => text}`."
  def tag_reasons do
    for {{:tag, tag}, _, reason} <- :ets.tab2list(@table), into: %{}, do: {tag, reason}
  end

  @doc false
  # At application start: a bad NXV_HOST_FALLBACK or :host_fallback config stops the start, as
  # every other bad setting does, rather than raising at the first fallback.
  def check_config!, do: global_mode()

  defp global_mode do
    case System.get_env("NXV_HOST_FALLBACK") do
      value when value in [nil, ""] ->
        validate_mode!(
          Application.get_env(:nx_vulkan, :host_fallback, :allow),
          "config :nx_vulkan, :host_fallback"
        )

      value ->
        validate_mode!(Map.get(@mode_names, value, value), "NXV_HOST_FALLBACK")
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
  # Runs `Nx.BinaryBackend.op(args...)` on host copies of `args` and returns the result on the
  # device of its tensors.
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
    :telemetry.execute([:nx_vulkan, :fallback], %{count: 1}, %{op: op, reason: reason})

    case Process.get(@process_tag) do
      nil ->
        :ok

      tag ->
        :ets.update_counter(@table, {:tag, tag}, {2, 1}, {{:tag, tag}, 0, nil})
        :ets.update_element(@table, {:tag, tag}, {3, "#{op}: #{reason}"})
    end

    Nx.Vulkan.Native.flush_for_fallback() |> Nx.Vulkan.Native.unwrap!()

    device =
      Enum.find_value(List.flatten(args), fn
        %T{data: %Nx.Vulkan.Backend{}} = t -> [device: Nx.Vulkan.Backend.device_of(t)]
        _ -> nil
      end) || []

    # Functions passed along (reduce, window_reduce) build tensors with the default backend: make
    # that the BinaryBackend while the host computes.
    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      apply(Nx.BinaryBackend, op, Enum.map(args, &to_host/1))
    end)
    |> to_device(device)
  end

  defp to_host(%T{data: %Nx.Vulkan.Backend{}} = t),
    do: %{t | data: %Nx.BinaryBackend{state: Nx.Vulkan.Backend.read_binary(t, :fallback)}}

  defp to_host(list) when is_list(list), do: Enum.map(list, &to_host/1)
  defp to_host(other), do: other

  defp to_device(%T{data: %Nx.BinaryBackend{state: binary}} = t, opts),
    do: Nx.Vulkan.Backend.from_binary(t, binary, opts)

  defp to_device(%T{} = t, _opts), do: t

  defp to_device(tuple, opts) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map(&to_device(&1, opts)) |> List.to_tuple()

  defp to_device(list, opts) when is_list(list), do: Enum.map(list, &to_device(&1, opts))
  defp to_device(other, _opts), do: other
end

defmodule Nx.Vulkan.ProgramCache do
  @moduledoc false
  # Programs Nx.Vulkan.Compiler built, keyed by {function key, argument templates, options}. Each
  # holds its intermediates' device memory, so the cache is bounded (@max_programs, the least
  # recently built goes first) and emptied when an allocation fails even after every process
  # was collected (Nx.Vulkan.Native's out-of-memory path): a program dropped here is rebuilt on
  # its next call, while the memory it held can be what the failing op needs. A caller that
  # already looked a program up keeps it alive until its call ends.
  @table :nx_vulkan_programs
  @max_programs 64

  def create_table, do: :ets.new(@table, [:named_table, :public, :set, read_concurrency: true])

  def get(key) do
    case :ets.lookup(@table, key) do
      [{_, _stamp, program}] -> program
      [] -> nil
    end
  end

  def put(key, program) do
    evict_oldest()
    :ets.insert(@table, {key, System.unique_integer([:monotonic]), program})
    :ok
  end

  # The number of programs dropped.
  def clear do
    size = :ets.info(@table, :size)
    :ets.delete_all_objects(@table)
    size
  end

  def size, do: :ets.info(@table, :size)

  defp evict_oldest do
    if :ets.info(@table, :size) >= @max_programs do
      {oldest, _} =
        :ets.foldl(
          fn {k, stamp, _}, {_, best} = acc -> if stamp < best, do: {k, stamp}, else: acc end,
          {nil, :infinity},
          @table
        )

      :ets.delete(@table, oldest)
    end
  end
end

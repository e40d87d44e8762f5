defmodule Nx.Vulkan.ConstantCache do
  @moduledoc false
  # Device buffers of small constants, keyed by {type, shape, value}. Nx.Defn's Evaluator
  # materialises the same constants (0, 1, the batch size...) on every step; sharing them saves a
  # fill dispatch and a buffer each time. Safe because tensors are never written after creation.
  # Bounded: constants of at most @max_elements elements, at most @max_entries of them.
  @table :nx_vulkan_constants
  @max_elements 1024
  @max_entries 4096

  def create_table, do: :ets.new(@table, [:named_table, :public, :set, read_concurrency: true])

  def get(key) do
    case :ets.lookup(@table, key) do
      [{_, data}] -> data
      [] -> nil
    end
  end

  def put(key, elements, data) do
    if elements <= @max_elements and :ets.info(@table, :size) < @max_entries do
      # Shared from now on: a user's backend_deallocate/1 must not free it under the others.
      Nx.Vulkan.Native.pin(data.ref)
      :ets.insert(@table, {key, data})
    end

    :ok
  end
end

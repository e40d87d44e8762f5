defmodule Nx.Vulkan.NxDoctestTest do
  use ExUnit.Case, async: true
  doctest Nx
end

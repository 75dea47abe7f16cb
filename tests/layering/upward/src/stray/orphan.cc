// A folder no layer owns: cmake/CheckLayers.cmake must report it.

"""The bundled mini cube's recipe (fixtures/mini): real images from installed packages.

`cube` lists the source families and rebuilds the cube; see its docstring for the modules.
"""

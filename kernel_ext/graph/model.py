"""The Graph model (being written)."""


class Graph:
    pass

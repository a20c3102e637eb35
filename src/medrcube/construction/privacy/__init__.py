"""construction/privacy"""

"""construction/readers"""

"""construction/mini"""

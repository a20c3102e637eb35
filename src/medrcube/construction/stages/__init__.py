"""construction/stages"""

import os

NAME_0 = 'm0'

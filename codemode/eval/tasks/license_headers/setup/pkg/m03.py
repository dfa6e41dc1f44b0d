import os

NAME_3 = 'm3'
